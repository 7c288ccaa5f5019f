//! A consumer following discovery: the snapshots of a service's groups become its
//! endpoint table, and each endpoint's warm-up factor is kept current.
//!
//! - **Groups.** The primary group's providers are the table while at least one of them
//!   is admissible (known to discovery and not excluded by health). When none is, the
//!   secondary group's providers join the table (the primary's stay, so health probes can
//!   bring them back); as soon as a primary endpoint is admissible again the table is the
//!   primary's alone.
//! - **Warm-up.** An endpoint with a start time ramps linearly to its full weight over
//!   its advertised warm-up (else the consumer's), see [`super::warmup_permille`]; the
//!   kernel folds the factor into the effective weight selectors see.
//! - **Cached set.** A snapshot keeps its instances while its registry is unreachable, so
//!   the table does not empty when etcd goes away.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::config::Groups;
use super::{unix_ms, warmup_permille, Backend, DiscoveryError, Listing, Provider, ServiceKey};
use axle_core::EndpointSpec;

/// What a follower drives: a client's endpoint table and its endpoints' facts.
pub trait Target: Send + Sync + 'static {
    /// Replaces `service`'s endpoints.
    fn set_endpoints(&self, service: &str, endpoints: Vec<EndpointSpec>);
    /// How many of `addresses` (endpoints of `service`) are admissible right now.
    fn admissible(&self, service: &str, addresses: &[&str]) -> usize;
    /// Sets endpoints' warm-up factors (address, permille; 1000 = full weight).
    fn set_warmups(&self, service: &str, warmups: &[(String, u32)]);
}

/// Which groups the table was last built from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowState {
    /// The group serving traffic: the primary, or the secondary while the primary has no
    /// admissible endpoint. Empty before the first listing.
    pub group: String,
    /// Endpoints in the table.
    pub endpoints: usize,
    /// Whether the primary group's registry was reachable at its last attempt.
    pub connected: bool,
    /// Full listings of the primary group applied so far.
    pub lists: u64,
    /// Tables pushed to the client so far.
    pub updates: u64,
    /// Registry entries of the groups followed that were skipped as invalid or over a
    /// cap (never dialled), each key revision once.
    pub skipped: u64,
}

/// The table to build from the groups' snapshots.
#[derive(Debug, PartialEq)]
pub struct Plan<'a> {
    /// The group serving traffic.
    pub group: &'a str,
    /// The instances of the table, primary first.
    pub instances: Vec<&'a Provider>,
}

/// The secondary-group rule (see the module doc). `admissible` counts the admissible
/// endpoints among the primary's.
pub fn plan<'a>(
    groups: &'a Groups,
    primary: &'a Listing,
    secondary: Option<&'a Listing>,
    admissible: impl Fn(&[&str]) -> usize,
) -> Plan<'a> {
    let mine: Vec<&Provider> = primary.instances.iter().collect();
    let addresses: Vec<&str> = mine.iter().map(|i| i.address.as_str()).collect();
    let primary_ok = !mine.is_empty() && admissible(&addresses) > 0;
    match (groups.secondary.as_deref(), secondary) {
        (Some(g), Some(s)) if !primary_ok && !s.instances.is_empty() => {
            let mut instances = mine;
            for i in s.instances.iter() {
                if !instances.iter().any(|p| p.address == i.address) {
                    instances.push(i);
                }
            }
            Plan {
                group: g,
                instances,
            }
        }
        _ => Plan {
            group: &groups.primary,
            instances: mine,
        },
    }
}

/// A running follower; stops when dropped.
pub struct Follow {
    state: watch::Receiver<FollowState>,
    task: tokio::task::JoinHandle<()>,
    /// This process's registration as a consumer of the service, when the registry keeps
    /// consumers ([`Backend::register_consumer`]); removed by [`Follow::stop`], else it
    /// runs out with its lease.
    consumer: Option<super::Registration>,
}

impl Follow {
    /// Follows `service` in `namespace` through `backend`, driving `target`. `warmup` is
    /// the ramp for providers that advertise none; `tick` how often health and warm-up
    /// are re-read. Must run inside a tokio runtime.
    pub fn start(
        target: Arc<dyn Target>,
        backend: &dyn Backend,
        namespace: &str,
        service: &str,
        groups: Groups,
        warmup: Duration,
        tick: Duration,
    ) -> Result<Follow, DiscoveryError> {
        let primary = backend.subscribe(&ServiceKey::new(namespace, service, &groups.primary)?);
        let secondary = match &groups.secondary {
            Some(g) => Some(backend.subscribe(&ServiceKey::new(namespace, service, g)?)),
            None => None,
        };
        let (tx, state) = watch::channel(FollowState::default());
        let task = tokio::spawn(run(
            target,
            service.to_string(),
            groups,
            primary,
            secondary,
            warmup,
            tick,
            tx,
        ));
        Ok(Follow {
            state,
            task,
            consumer: None,
        })
    }

    /// Registers this process as a consumer of the service followed, for `application`,
    /// kept for as long as the follower runs. A registry that cannot take it is logged,
    /// not fatal: following does not depend on being listed.
    pub async fn register_consumer(
        &mut self,
        backend: &dyn Backend,
        key: &ServiceKey,
        application: &str,
    ) {
        match backend.register_consumer(key, application).await {
            Ok(r) => self.consumer = r,
            Err(e) => tracing::warn!(%key, "cannot register as a consumer: {e}"),
        }
    }

    /// Stops following and removes the consumer registration (bounded by the backend).
    pub async fn stop(mut self) {
        self.task.abort();
        if let Some(r) = self.consumer.take() {
            r.deregister().await;
        }
    }

    /// The follower's state now.
    pub fn state(&self) -> FollowState {
        self.state.borrow().clone()
    }

    /// Waits (at most `timeout`) for the first table built from a listing; false if none
    /// came (the registry is unreachable and nothing is cached).
    pub async fn synced(&self, timeout: Duration) -> bool {
        let mut rx = self.state.clone();
        tokio::time::timeout(timeout, rx.wait_for(|s| s.lists > 0 && s.updates > 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    target: Arc<dyn Target>,
    service: String,
    groups: Groups,
    mut primary: watch::Receiver<Listing>,
    mut secondary: Option<watch::Receiver<Listing>>,
    warmup: Duration,
    tick: Duration,
    tx: watch::Sender<FollowState>,
) {
    let mut applied: Option<Vec<EndpointSpec>> = None;
    let mut warm: std::collections::HashMap<String, u32> = Default::default();
    let (mut primary_open, mut secondary_open) = (true, secondary.is_some());
    loop {
        {
            let p = primary.borrow_and_update().clone();
            let s = secondary.as_mut().map(|s| s.borrow_and_update().clone());
            let plan = plan(&groups, &p, s.as_ref(), |addrs| {
                target.admissible(&service, addrs)
            });
            let mut specs: Vec<EndpointSpec> =
                plan.instances.iter().map(|i| i.endpoint_spec()).collect();
            specs.sort_by(|a, b| a.address.cmp(&b.address));
            let synced = p.lists > 0;
            let changed = applied.as_ref() != Some(&specs);
            // Nothing is pushed before the first listing: an empty "not yet known" set
            // must not replace a table the client was built with.
            if synced && changed {
                tracing::info!(
                    service,
                    group = plan.group,
                    endpoints = specs.len(),
                    "endpoints changed"
                );
                target.set_endpoints(&service, specs.clone());
                applied = Some(specs);
                warm.clear();
                tx.send_modify(|s| s.updates += 1);
            }
            let now = unix_ms();
            let mut moved = Vec::new();
            for i in &plan.instances {
                let w = i.warmup_ms.map_or(warmup, Duration::from_millis);
                let permille = warmup_permille(i.start_ms, w, now);
                if warm.get(&i.address) != Some(&permille) {
                    moved.push((i.address.clone(), permille));
                    warm.insert(i.address.clone(), permille);
                }
            }
            target.set_warmups(&service, &moved);
            let group = plan.group.to_string();
            let endpoints = plan.instances.len();
            let skipped = p.skipped + s.as_ref().map_or(0, |s| s.skipped);
            tx.send_if_modified(|s| {
                let next = FollowState {
                    group: if synced { group } else { String::new() },
                    endpoints,
                    connected: p.connected,
                    lists: p.lists,
                    updates: s.updates,
                    skipped,
                };
                let changed = *s != next;
                *s = next;
                changed
            });
        }
        tokio::select! {
            _ = tx.closed() => return,
            r = primary.changed(), if primary_open => primary_open = r.is_ok(),
            r = async {
                match secondary.as_mut() {
                    Some(s) => s.changed().await,
                    None => std::future::pending().await,
                }
            }, if secondary_open => secondary_open = r.is_ok(),
            _ = tokio::time::sleep(tick) => {}
        }
    }
}
