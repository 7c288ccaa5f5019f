//! What `axle stats` and the admin endpoint show of a client: its services' endpoints and
//! method policies, as snapshots for people.

use axle_governance::breaker::BreakerState;

use crate::state::{ClientState, UNDECLARED};

/// A snapshot of one endpoint as this client sees it, for people (`axle stats`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EndpointView {
    pub id: u32,
    pub address: String,
    /// healthy, subhealthy, removed or dead.
    pub state: String,
    /// Whether selection may use it now.
    pub in_rotation: bool,
    pub calls: u64,
    pub faults: u64,
    /// Over the window: calls, timeouts, other faults, refusals.
    pub window_total: u32,
    pub window_timeouts: u32,
    pub window_failures: u32,
    pub window_rejected: u32,
    /// Endpoint faults / (calls − refusals) over the window.
    pub error_rate: f64,
    pub in_flight: u32,
    pub ewma_latency_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Configured weight, and the weight selectors see (× warm-up × health).
    pub weight: u32,
    pub effective_weight: u32,
    pub consecutive_failures: u32,
    pub heartbeat_failures: u32,
    /// Seconds since the first and the latest call (none before the first).
    pub first_call_s_ago: Option<f64>,
    pub last_call_s_ago: Option<f64>,
}

/// One service's endpoints and method policies, for people.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ServiceView {
    pub service: String,
    pub endpoints: Vec<EndpointView>,
    /// The policies the client keeps: one per method the manifest declares, then `*`,
    /// which every other name shares (so their number never grows with calls).
    #[serde(default)]
    pub policies: Vec<PolicyView>,
    /// Its shadow selector and routers: what they would have decided (`docs/shadow.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<axle_plugin_host::shadow::ShadowView>,
}

/// One method policy, for people.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PolicyView {
    /// The declared method, or `*`.
    pub method: String,
    /// closed, open or half-open.
    pub breaker: String,
    pub breaker_opened: u64,
    /// Request shapes whose route is memoised now.
    pub route_shapes: usize,
    /// What its calls came to: outcomes by class, retries, failovers, hedges, latency.
    #[serde(flatten, default)]
    pub counts: crate::stages::count::CallCounts,
}

impl ClientState {
    /// Every service's endpoints, as this client sees them.
    pub fn views(&self) -> Vec<ServiceView> {
        let now = axle_core::now_ns();
        let ago = |t: u64| (t > 0).then(|| now.saturating_sub(t) as f64 / 1e9);
        let mut names: Vec<&String> = self.services.keys().collect();
        names.sort();
        names
            .into_iter()
            .map(|name| {
                let svc = &self.services[name];
                let current = svc.read();
                let rotation = &current.rotation;
                let endpoints = svc
                    .members
                    .load()
                    .iter()
                    .filter_map(|id| self.endpoint(*id))
                    .map(|e| {
                        let f = e.cell.snapshot();
                        let w = e.cell.window();
                        let (calls, faults) = e.cell.totals();
                        let status = e.health.status();
                        let (first, last) = e.cell.call_times_ns();
                        let counted = w.total.saturating_sub(w.rejected);
                        EndpointView {
                            id: e.id,
                            address: e.spec.load().address.clone(),
                            state: status.shown().to_string(),
                            in_rotation: rotation.members.contains(&e.id),
                            calls,
                            faults,
                            window_total: w.total,
                            window_timeouts: w.timeouts,
                            window_failures: w.failures,
                            window_rejected: w.rejected,
                            error_rate: if counted == 0 {
                                0.0
                            } else {
                                f64::from(w.timeouts + w.failures) / f64::from(counted)
                            },
                            in_flight: f.in_flight,
                            ewma_latency_ns: f.ewma_latency_ns,
                            p50_ns: w.p50_ns,
                            p99_ns: w.p99_ns,
                            weight: e.spec.load().weight,
                            effective_weight: f.weight,
                            consecutive_failures: e.cell.consecutive_failures(),
                            heartbeat_failures: status.heartbeat_failures,
                            first_call_s_ago: ago(first),
                            last_call_s_ago: ago(last),
                        }
                    })
                    .collect();
                let loaded = &current.policies;
                let mut policies: Vec<PolicyView> = loaded
                    .all()
                    .map(|p| PolicyView {
                        method: p.method.to_string(),
                        breaker: match p.breaker.state() {
                            BreakerState::Closed => "closed",
                            BreakerState::Open => "open",
                            BreakerState::HalfOpen => "half-open",
                        }
                        .to_string(),
                        breaker_opened: p.breaker.times_opened(),
                        route_shapes: current.routes(p).map_or(0, |r| r.len()),
                        counts: p.counters.counts(),
                    })
                    .collect();
                // Declared methods by name, `*` last.
                policies.sort_by_key(|p| (p.method == UNDECLARED, p.method.clone()));
                let shadows = loaded.slots().shadow.iter().flat_map(|s| s.counters());
                ServiceView {
                    service: name.clone(),
                    endpoints,
                    policies,
                    shadows: shadows.map(|c| c.view()).collect(),
                }
            })
            .collect()
    }
}
