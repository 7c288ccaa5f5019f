//! The caller's side: a [`Client`] makes calls through the pipeline of DESIGN.md, one
//! stage per file in `stages/`:
//!
//! ```text
//! route (router plugins, memoised) -> select (selector plugin) -> encode (serializer
//! plugin, skipped for raw bytes) -> send (multiplexed connection, deadline) -> feedback
//! (kernel facts + selector) -> decode
//! ```
//!
//! Deadlines, retries and breakers (governance) and health filtering wrap these stages
//! without reshaping them.

mod discovery_target;
mod error;
pub mod health;
pub mod loadout;
mod options;
pub(crate) mod registry;
pub(crate) mod stages;

pub use error::CallError;
pub use options::CallOptions;
pub use registry::{ClientConfig, EndpointView, ServiceView};

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use axle_core::payload;
use axle_governance::breaker::Permit;
use axle_governance::{Fallback, Governance};
use axle_plugin_host::kinds::serializer::Value;
use axle_plugin_host::PluginHost;
use registry::Registry;
use registry::ServiceState;
use stages::retry::Next;

/// The answer of a raw call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The response body.
    pub payload: Bytes,
    /// How the body is encoded.
    pub content_type: String,
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
    pub svc: &'a Arc<ServiceState>,
    pub policy: &'a registry::MethodPolicy,
    pub method: &'a str,
    pub body: &'a Bytes,
    pub content_type: &'a str,
    pub options: &'a CallOptions,
    pub deadline: Instant,
}

/// Makes calls to the services a manifest (or the caller) names.
#[derive(Clone)]
pub struct Client {
    registry: Arc<Registry>,
    /// The health monitor starts with the first call (it needs a Tokio runtime, which a
    /// client may be built without).
    monitor: Arc<std::sync::OnceLock<()>>,
}

impl Client {
    /// A client for `config`, loading the plugins its manifest names into `host`.
    pub fn new(host: &PluginHost, config: ClientConfig) -> anyhow::Result<Client> {
        let client = Client {
            registry: Arc::new(Registry::build(host, config)?),
            monitor: Arc::new(std::sync::OnceLock::new()),
        };
        client.start_monitor();
        Ok(client)
    }

    /// Starts the health monitor if it is not running and a runtime is at hand.
    fn start_monitor(&self) {
        if self.monitor.get().is_none() && tokio::runtime::Handle::try_current().is_ok() {
            self.monitor
                .get_or_init(|| crate::health::monitor::spawn(&self.registry));
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
        self.registry.set_endpoints(service, endpoints)
    }

    /// Sets the warm-up factor (per mille, 1000 = warmed up) of endpoints by address,
    /// then republishes the table if an effective weight moved (discovery computes the
    /// factors from each provider's start time; the kernel folds them into the weight).
    pub fn set_warmups(&self, warmups: &[(String, u32)]) {
        if warmups.is_empty() {
            return;
        }
        for ep in self.registry.all_endpoints() {
            let spec = ep.spec.load();
            if let Some((_, permille)) = warmups.iter().find(|(a, _)| *a == spec.address) {
                ep.cell.set_warmup_permille(*permille);
            }
        }
        self.registry.publish();
    }

    /// How many endpoints of `service` selection may use now (0 also for an unknown
    /// service).
    pub fn admissible(&self, service: &str) -> usize {
        self.registry
            .services
            .get(service)
            .map_or(0, |s| s.rotation.load().members.len())
    }

    /// Health events (disabled, removed, unreachable, re-admitted) from now on.
    pub fn health_events(&self) -> tokio::sync::broadcast::Receiver<crate::health::HealthEvent> {
        self.registry.subscribe()
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
        let svc = self.registry.service(service)?;
        let (body, content_type) = stages::encode::encode(&svc, value)?;
        let reply = self
            .invoke(service, method, body, &content_type, options)
            .await?;
        Ok(Answer {
            value: stages::encode::decode(&self.registry, &reply)?,
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
    pub async fn call_raw(
        &self,
        service: &str,
        method: &str,
        body: Bytes,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        self.invoke(service, method, body, payload::RAW, options)
            .await
    }

    /// The whole call: deadline → breaker → attempts (retries, failover, hedging) →
    /// fallback.
    async fn invoke(
        &self,
        service: &str,
        method: &str,
        body: Bytes,
        content_type: &str,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        self.start_monitor();
        let svc = self.registry.service(service)?;
        let policy = svc.policy(method);
        let g = &policy.governance;
        let now = Instant::now();
        let deadline = now + options.timeout.unwrap_or(g.timeout());
        let result = match policy.breaker.try_acquire() {
            Permit::Rejected => Err(CallError::BreakerOpen {
                target: format!("{service}/{method}"),
            }),
            permit => {
                svc.budget.deposit();
                let call = Call {
                    svc: &svc,
                    policy: &policy,
                    method,
                    body: &body,
                    content_type,
                    options,
                    deadline,
                };
                let result = self.attempts(&call, g).await;
                let slow = policy.breaker.is_slow(now.elapsed());
                policy
                    .breaker
                    .record(permit, stages::feedback::verdict(&result, slow));
                result
            }
        };
        match (result, &g.fallback) {
            (Err(e), Some(fallback)) if options.fallback && stages::fallback::applies(&e) => {
                tracing::debug!(service, method, "answering with the fallback: {e}");
                self.fallback(&svc, fallback, body, content_type, options)
                    .await
            }
            (result, _) => result,
        }
    }

    /// Attempts until one succeeds, or a failure is final, or retries, budget or deadline
    /// run out. The first attempt is hedged when the method says so.
    async fn attempts(&self, call: &Call<'_>, g: &Governance) -> Result<Reply, CallError> {
        let candidates =
            stages::route::candidates(call.svc, call.policy, call.method, call.options)?;
        let mut tried: Vec<u32> = Vec::new();
        let mut retries_used = 0;
        let hedge =
            (g.idempotent && g.hedge_delay_ms > 0).then(|| Duration::from_millis(g.hedge_delay_ms));
        loop {
            let result = match hedge.filter(|_| tried.is_empty()) {
                Some(delay) => self.hedged(call, &candidates, &mut tried, delay).await,
                None => self.attempt(call, &candidates, &mut tried).await,
            };
            let err = match result {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            match stages::retry::next(&err, g.idempotent) {
                Next::Final => return Err(err),
                Next::Retry if retries_used >= g.retries => return Err(err),
                Next::Retry => {
                    let wait = stages::retry::backoff(
                        Duration::from_millis(g.retry_interval_ms),
                        retries_used,
                    );
                    retries_used += 1;
                    if !stages::retry::fits(wait, call.deadline) || !call.svc.budget.withdraw() {
                        return Err(err);
                    }
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                // Failover never re-runs a handler, and each endpoint is tried at most
                // once per call, so it is bounded without the retry budget (as Finagle's
                // requeues are kept apart from its retries).
                Next::Failover => {
                    if Instant::now() >= call.deadline {
                        return Err(err);
                    }
                }
            }
            if tried.len() >= candidates.members.len() {
                return Err(err);
            }
        }
    }

    /// One attempt: select (excluding `tried`), send, feed the outcome back.
    async fn attempt(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
    ) -> Result<Reply, CallError> {
        let (ep, permit) = self.choose(call, candidates, tried)?;
        self.send_to(call, ep, permit).await
    }

    /// Picks the next endpoint (excluding `tried`, and endpoints whose breaker is open)
    /// and records it as tried.
    fn choose(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
    ) -> Result<(Arc<registry::Endpoint>, Permit), CallError> {
        let (ep, permit) = stages::select::pick(
            &self.registry,
            call.svc,
            &call.policy.selector,
            candidates,
            tried,
            call.options,
        )?;
        tried.push(ep.id);
        Ok((ep, permit))
    }

    /// Sends to one chosen endpoint and records the outcome.
    async fn send_to(
        &self,
        call: &Call<'_>,
        ep: Arc<registry::Endpoint>,
        permit: Permit,
    ) -> Result<Reply, CallError> {
        let now = Instant::now();
        let started = stages::feedback::started(&ep, now);
        let result =
            stages::send::send(&ep, call, call.deadline.saturating_duration_since(now)).await;
        if stages::feedback::finished(&call.policy.selector, &ep, permit, started, &result) {
            // Rare (once per endpoint going down): out of rotation before the next pick.
            self.registry.publish();
            self.registry
                .event(&ep, crate::health::HealthChange::Unreachable);
        }
        result
    }

    /// The first attempt, with a backup to another endpoint if no answer came within
    /// `delay`: the first success wins and the other is cancelled (dropping its future
    /// sends a `cancel` frame). A backup needs the retry budget.
    async fn hedged(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
        delay: Duration,
    ) -> Result<Reply, CallError> {
        let (first_ep, first_permit) = self.choose(call, candidates, tried)?;
        let first = self.send_to(call, first_ep, first_permit);
        tokio::pin!(first);
        tokio::select! {
            r = &mut first => return r,
            _ = tokio::time::sleep(delay) => {}
        }
        if !call.svc.budget.withdraw() {
            return first.await;
        }
        let backup = match self.choose(call, candidates, tried) {
            Ok((ep, permit)) => self.send_to(call, ep, permit),
            Err(_) => return first.await,
        };
        tokio::pin!(backup);
        tokio::select! {
            r = &mut first => match r {
                Ok(reply) => Ok(reply),
                Err(_) => backup.await,
            },
            r = &mut backup => match r {
                Ok(reply) => Ok(reply),
                Err(_) => first.await,
            },
        }
    }

    /// Answers with the method's fallback.
    async fn fallback(
        &self,
        svc: &Arc<ServiceState>,
        fallback: &Fallback,
        body: Bytes,
        content_type: &str,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        let mut reply = match fallback {
            Fallback::Value(v) => {
                let json = serde_json::to_value(v).map_err(|e| CallError::Encode(e.to_string()))?;
                let value = payload::to_value(&json).map_err(CallError::Encode)?;
                let (payload, content_type) = stages::encode::encode(svc, &value)?;
                Reply {
                    payload,
                    content_type,
                    endpoint: None,
                    fallback: false,
                }
            }
            Fallback::Call(target) => {
                let (service, method) = target.split_once('/').unwrap_or((target, ""));
                // The fallback's own failure is final: no fallback of a fallback.
                let options = CallOptions {
                    fallback: false,
                    ..options.clone()
                };
                Box::pin(self.invoke(service, method, body, content_type, &options)).await?
            }
        };
        reply.fallback = true;
        Ok(reply)
    }

    /// The counters of the plugins this client runs (calls, faults by cause, replaced
    /// instances), by plugin name.
    pub fn plugin_stats(&self) -> Vec<(String, axle_plugin_host::StatsSnapshot)> {
        self.registry
            .loadout
            .load()
            .plugins
            .iter()
            .map(|(name, (_, p))| (name.clone(), p.stats.snapshot()))
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
    ) -> anyhow::Result<loadout::LoadoutChange> {
        self.registry.swap(host, manifest)
    }

    /// The manifest the client's plugins come from now.
    pub fn manifest(&self) -> Arc<axle_manifest::Manifest> {
        self.registry.loadout.load().manifest.clone()
    }

    /// Dials every endpoint no call has reached yet and heartbeats the connected ones,
    /// once, now; the health monitor carries on from there. For a client that wants to
    /// know what is reachable before (or without) calling (`axle stats --manifest`).
    pub async fn probe_endpoints(&self) {
        self.start_monitor();
        crate::health::monitor::reach_all(&self.registry).await;
    }

    /// Every service's endpoints as this client sees them: health, rotation, facts.
    pub fn services(&self) -> Vec<ServiceView> {
        self.registry.views()
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
