//! Health detection: each endpoint's state as this caller sees it — healthy, subhealthy or
//! dead — from the kernel's facts (connect failures, heartbeats) and the health-scorer
//! plugin's verdicts on the outcome window; which endpoints selection may use
//! (`rotation.rs`); the tasks that heartbeat, score, remove and re-admit (`monitor.rs`);
//! and the re-dialling of endpoints that went away or refuse connections (`redial.rs`).
//!
//! Every change reaches the plugins as a new versioned endpoint table (the client's
//! client state publishes it), so no selector or router keeps routing to a removed endpoint.

pub mod monitor;
pub mod redial;
pub mod rotation;

use std::sync::Mutex;

pub use axle_plugin_host::kinds::health_scorer::HealthState;

/// What happened to an endpoint, as events for logs and subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthChange {
    /// Judged subhealthy: out of rotation while a healthy endpoint is left.
    Disabled,
    /// Out until a probe after the re-admission sleep says otherwise.
    Removed,
    /// Cannot be reached (connect refused, heartbeats lost).
    Unreachable,
    /// A probe succeeded (or the scorer judged it healthy again): back in rotation.
    Readmitted,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthEvent {
    pub endpoint: u32,
    pub address: String,
    pub change: HealthChange,
}

/// The health record of one endpoint. Written by the monitor (and, for a refused connect,
/// by the call path); read when the rotation is rebuilt and by `axle stats`.
#[derive(Clone, Copy, Debug)]
pub struct Status {
    /// The last verdict's state.
    pub state: HealthState,
    /// The last verdict's weight factor, per mille.
    pub weight_permille: u32,
    /// Cannot be reached.
    pub unreachable: bool,
    /// Removed at this kernel-clock time (`axle_core::now_ns`, virtual under `axle sim`),
    /// waiting for the re-admission sleep, then a probe.
    pub removed_at: Option<u64>,
    /// Unhealthy verdicts in a row.
    pub unhealthy_verdicts: u32,
    /// Heartbeats lost in a row.
    pub heartbeat_failures: u32,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            state: HealthState::Healthy,
            weight_permille: 1000,
            unreachable: false,
            removed_at: None,
            unhealthy_verdicts: 0,
            heartbeat_failures: 0,
        }
    }
}

impl Status {
    /// The standing the rotation is computed from.
    pub fn standing(&self, id: u32) -> rotation::Standing {
        rotation::Standing {
            id,
            state: self.state,
            removed: self.removed_at.is_some(),
            unreachable: self.unreachable,
        }
    }

    /// The state people see: an unreachable or removed endpoint is dead to its callers.
    pub fn shown(&self) -> &'static str {
        match (self.unreachable, self.removed_at.is_some(), self.state) {
            (true, _, _) => "dead",
            (false, true, _) => "removed",
            (false, false, HealthState::Healthy) => "healthy",
            (false, false, HealthState::Subhealthy) => "subhealthy",
            (false, false, HealthState::Dead) => "dead",
        }
    }
}

/// An endpoint's health, behind a lock taken off the hot path only.
#[derive(Debug, Default)]
pub struct EndpointHealth {
    status: Mutex<Status>,
    /// A re-dial task is bringing it back (`redial.rs`): one at a time.
    pub redialling: std::sync::atomic::AtomicBool,
}

impl EndpointHealth {
    /// A copy of the record.
    pub fn status(&self) -> Status {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the record; returns what `f` returns.
    pub fn update<R>(&self, f: impl FnOnce(&mut Status) -> R) -> R {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A connect was refused: unreachable from now on. Returns whether that is news.
    pub fn mark_unreachable(&self) -> bool {
        self.update(|s| !std::mem::replace(&mut s.unreachable, true))
    }
}

/// The health settings a client runs with (from the global governance tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub heartbeat_interval: std::time::Duration,
    pub heartbeat_timeout: std::time::Duration,
    pub heartbeat_failures_dead: u32,
    pub score_interval: std::time::Duration,
    pub unhealthy_times: u32,
    pub readmit_sleep: std::time::Duration,
}

impl From<&axle_governance::Governance> for Settings {
    fn from(g: &axle_governance::Governance) -> Self {
        use std::time::Duration;
        Settings {
            heartbeat_interval: Duration::from_millis(g.heartbeat_interval_ms),
            heartbeat_timeout: Duration::from_millis(g.heartbeat_timeout_ms),
            heartbeat_failures_dead: g.heartbeat_failures_dead,
            score_interval: Duration::from_millis(g.health_interval_ms),
            unhealthy_times: g.unhealthy_times,
            readmit_sleep: Duration::from_millis(g.readmit_sleep_ms),
        }
    }
}
