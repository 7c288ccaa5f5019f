//! The caller's side: a [`Client`] makes calls through the request path that
//! `pipeline.rs` lists in order (one stage per file in `stages/`; `docs/architecture.md`
//! draws it). The client's state — endpoints, rotations, the plugins filling its slots —
//! is `state.rs` (`ClientState`); health (states, rotation, monitor) is the [`health`] module.

mod caller_address;
mod current;
mod discovery_target;
mod error;
pub mod health;
pub mod loadout;
mod options;
mod pipeline;
pub mod rules;
pub(crate) mod stages;
pub(crate) mod state;
mod trace;
mod views;
mod weights;

#[cfg(test)]
mod tests;

pub use axle_wire::ContentType;
pub use error::CallError;

/// The request path's pure decisions, for whoever replays it off the network
/// (`axle sim`): how an attempt's result counts (facts, breakers) and what may follow a
/// failed one (failover, retry, budget). The same functions the pipeline calls.
pub mod decide {
    pub use crate::stages::feedback::{classify, verdict};
    pub use crate::stages::retry::{backoff, costs_budget, next, Next, Rerun};
}
pub use options::CallOptions;
pub use stages::count::CallCounts;
pub use state::ClientConfig;
pub use views::{EndpointView, PolicyView, ServiceView};

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use axle_core::payload;
use axle_plugin_host::kinds::serializer::Value;
use axle_plugin_host::PluginHost;
use state::ClientState;
use state::ServiceState;

/// The answer of a raw call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The response body.
    pub payload: Bytes,
    /// How the body is encoded.
    pub content_type: ContentType,
    /// The endpoint that answered (none for a static fallback).
    pub endpoint: Option<u32>,
    /// Whether this is the method's fallback rather than a real answer.
    pub fallback: bool,
}

/// A decoded answer, with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer<T> {
    pub value: T,
    /// The endpoint that answered (none for a static fallback).
    pub endpoint: Option<u32>,
    /// Whether this is the method's fallback rather than a real answer.
    pub fallback: bool,
}

/// One call on its way: what every attempt of it shares.
pub(crate) struct Call<'a> {
    pub svc: &'a ServiceState,
    pub policy: &'a state::MethodPolicy,
    /// What the policy was read from (one load, `ServiceState::current`): the call's
    /// rotation, its memoised route and the endpoints it picks are borrowed from it.
    pub current: &'a state::Current,
    pub method: &'a str,
    pub body: &'a Bytes,
    /// The request before encoding (typed calls): routers' declared fields are read from
    /// it without decoding the body.
    pub value: Option<&'a Value>,
    pub content_type: &'a str,
    pub options: &'a CallOptions,
    pub deadline: Instant,
    /// The same for every attempt of this call (retries, failovers, hedges): a provider
    /// that deduplicates the method tells a repeat from a new call by it.
    pub request_id: [u8; 16],
    /// The call's trace and its own span (each attempt is a child span of it).
    pub trace: axle_core::TraceContext,
    /// Attempts started so far (hedges included), numbering each attempt's span.
    pub attempts: std::sync::atomic::AtomicU32,
}

/// Makes calls to the services a manifest (or the caller) names.
///
/// A clone shares everything (one reference count: callers clone a client into each
/// task, often once per call).
#[derive(Clone)]
pub struct Client {
    state: Arc<ClientState>,
}

impl Client {
    /// A client for `config`, loading the plugins its manifest names into `host`.
    pub fn new(host: &PluginHost, config: ClientConfig) -> anyhow::Result<Client> {
        let client = Client {
            state: Arc::new(ClientState::build(host, config)?),
        };
        client.start_monitor();
        Ok(client)
    }

    /// Starts the health monitor if it is not running and a runtime is at hand.
    fn start_monitor(&self) {
        if self.state.monitor.get().is_none() && tokio::runtime::Handle::try_current().is_ok() {
            self.state
                .monitor
                .get_or_init(|| crate::health::monitor::spawn(&self.state));
        }
    }

    /// Replaces the endpoints of `service` while calls flow (discovery uses this): new
    /// endpoints join, missing ones leave, kept ones keep their connections and health.
    /// Selectors and routers get the new table before this returns.
    pub fn set_endpoints(
        &self,
        service: &str,
        endpoints: Vec<axle_manifest::EndpointSpec>,
    ) -> anyhow::Result<()> {
        self.state.set_endpoints(service, endpoints)
    }

    /// Sets the warm-up factor (per mille, 1000 = warmed up) of endpoints by address,
    /// then republishes the table if an effective weight moved (discovery computes the
    /// factors from each provider's start time; the kernel folds them into the weight).
    pub fn set_warmups(&self, warmups: &[(String, u32)]) {
        if warmups.is_empty() {
            return;
        }
        for ep in self.state.all_endpoints() {
            let spec = ep.spec.load();
            if let Some((_, permille)) = warmups.iter().find(|(a, _)| *a == spec.address) {
                ep.cell.set_warmup_permille(*permille);
            }
        }
        self.state.publish();
    }

    /// How many endpoints of `service` selection may use now (0 also for an unknown
    /// service).
    pub fn admissible(&self, service: &str) -> usize {
        self.state
            .services
            .get(service)
            .map_or(0, |s| s.read().rotation.members.len())
    }

    /// Health events (disabled, removed, unreachable, re-admitted) from now on.
    pub fn health_events(&self) -> tokio::sync::broadcast::Receiver<crate::health::HealthEvent> {
        self.state.subscribe()
    }

    /// A typed call: `req` is encoded by the service's serializer plugin, the answer
    /// decoded by the serializer of the content type it came back in.
    pub async fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        service: &str,
        method: &str,
        req: &Req,
        options: &CallOptions,
    ) -> Result<Resp, CallError> {
        let value = self
            .call_value(
                service,
                method,
                &payload::to_value(req).map_err(CallError::Encode)?,
                options,
            )
            .await?;
        payload::from_value(&value).map_err(CallError::Decode)
    }

    /// A call with a value in the serializers' model (what `axle call` uses for JSON).
    pub async fn call_value(
        &self,
        service: &str,
        method: &str,
        value: &Value,
        options: &CallOptions,
    ) -> Result<Value, CallError> {
        Ok(self
            .call_value_at(service, method, value, options)
            .await?
            .value)
    }

    /// [`Client::call_value`], also saying which endpoint answered and whether the answer
    /// is a fallback.
    pub async fn call_value_at(
        &self,
        service: &str,
        method: &str,
        value: &Value,
        options: &CallOptions,
    ) -> Result<Answer<Value>, CallError> {
        // The budget runs from here: the serializer's time (a replacement instance
        // included) is the call's.
        let started = Instant::now();
        let svc = self.state.service(service)?;
        let (body, content_type) = stages::encode::encode(svc, value)?;
        let reply = self
            .invoke(
                service,
                method,
                body,
                Some(value),
                &content_type,
                options,
                started,
            )
            .await?;
        Ok(Answer {
            value: stages::encode::decode(&self.state, &reply)?,
            endpoint: reply.endpoint,
            fallback: reply.fallback,
        })
    }

    /// A typed call that also says whether the answer is a fallback.
    pub async fn call_detailed<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        service: &str,
        method: &str,
        req: &Req,
        options: &CallOptions,
    ) -> Result<Answer<Resp>, CallError> {
        let value = payload::to_value(req).map_err(CallError::Encode)?;
        let answer = self.call_value_at(service, method, &value, options).await?;
        Ok(Answer {
            value: payload::from_value(&answer.value).map_err(CallError::Decode)?,
            endpoint: answer.endpoint,
            fallback: answer.fallback,
        })
    }

    /// A call whose payload is already bytes (content type `raw` unless `content_type`
    /// says otherwise): no serializer runs.
    ///
    /// The call's future is `invoke`'s own, not one wrapping it: a future is moved by
    /// copying, each level once (`docs/performance.md`, "The size of a call's future").
    /// Its budget runs from this call.
    pub fn call_raw<'a>(
        &'a self,
        service: &'a str,
        method: &'a str,
        body: Bytes,
        options: &'a CallOptions,
    ) -> impl Future<Output = Result<Reply, CallError>> + Send + 'a {
        self.invoke(
            service,
            method,
            body,
            None,
            payload::RAW,
            options,
            Instant::now(),
        )
    }

    /// The counters of the plugins this client runs (calls, faults by cause, replaced
    /// instances), by plugin name.
    pub fn plugin_stats(&self) -> Vec<(String, axle_plugin_host::StatsSnapshot)> {
        self.plugins()
            .into_iter()
            .map(|c| (c.name, c.stats))
            .collect()
    }

    /// The same as [`Client::plugin_stats`], named rows (what `axle stats` shows).
    pub fn plugins(&self) -> Vec<axle_plugin_host::PluginCounters> {
        self.state
            .loadout
            .load()
            .plugins
            .iter()
            .map(|(name, (_, p))| axle_plugin_host::PluginCounters {
                name: name.clone(),
                stats: p.stats.snapshot(),
            })
            .collect()
    }

    /// Hot-swap to the plugins and slots of `manifest` (see [`loadout`]): new or changed
    /// plugins are loaded through `host`'s cache, configured and self-checked before any
    /// call reaches them; on an error nothing changes and the error says why. Returns
    /// what was loaded and what kept running.
    pub fn swap(
        &self,
        host: &PluginHost,
        manifest: axle_manifest::Manifest,
    ) -> anyhow::Result<axle_plugin_host::SwapReport> {
        self.state.swap(host, manifest)
    }

    /// Records how `status.service`'s run-time rule stands (whoever follows the rules
    /// calls this after each version, applied or refused).
    pub fn set_rule_status(&self, status: rules::RuleStatus) {
        self.state.rules.set(status);
    }

    /// The run-time rules this client follows, per service (`axle stats` shows them).
    pub fn rules(&self) -> Vec<rules::RuleStatus> {
        self.state.rules.all()
    }

    /// The manifest the client's plugins come from now.
    pub fn manifest(&self) -> Arc<axle_manifest::Manifest> {
        self.state.loadout.load().manifest.clone()
    }

    /// Dials every endpoint no call has reached yet and heartbeats the connected ones,
    /// once, now; the health monitor carries on from there. For a client that wants to
    /// know what is reachable before (or without) calling (`axle stats --manifest`).
    pub async fn probe_endpoints(&self) {
        self.start_monitor();
        crate::health::monitor::reach_all(&self.state).await;
    }

    /// Every service's endpoints as this client sees them (health, rotation, facts), and
    /// the method policies it keeps (one per declared method, and `*`).
    pub fn services(&self) -> Vec<ServiceView> {
        self.state.views()
    }

    /// Every endpoint as this client sees it (an endpoint of two services once).
    pub fn endpoints(&self) -> Vec<EndpointView> {
        let mut all: Vec<EndpointView> = self
            .services()
            .into_iter()
            .flat_map(|s| s.endpoints)
            .collect();
        all.sort_by_key(|e| e.id);
        all.dedup_by_key(|e| e.id);
        all
    }
}
