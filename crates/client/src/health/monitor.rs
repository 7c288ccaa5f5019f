//! The health monitor of one client: two tasks, off the request path.
//!
//! - **Heartbeats and probes**, every `heartbeat-interval-ms`: a ping on each connected
//!   endpoint (lost `heartbeat-failures-dead` times in a row: the connection is closed and
//!   the endpoint unreachable); and a probe — dial plus heartbeat — for each removed
//!   endpoint whose `readmit-sleep-ms` is over. A probe's answer decides: the endpoint is
//!   re-admitted with a clean window, or sleeps again. One probe, not all the traffic at
//!   once.
//! - **Links**, whenever a connection stops taking requests (a goaway, or it closed: the
//!   links' watch) and every heartbeat interval: each endpoint that went away or is
//!   unreachable, and was not removed by the scorer, is re-dialled until it answers
//!   (`redial.rs`).
//! - **Scoring**, every `health-interval-ms` and whenever the call path saw a refused
//!   connect: the health-scorer plugin judges each reachable endpoint's window; then the
//!   state recomputes the rotations and publishes a new table if anything changed.
//!
//! Both hold the state weakly between rounds: dropping the client ends them.

use std::sync::{Arc, Weak};

use axle_core::now_ns;
use axle_facts::EndpointCell;

use super::{EndpointHealth, HealthChange, HealthState, Settings, Status};
use crate::state::{ClientState, Endpoint};
use axle_plugin_host::kinds::health_scorer::{Verdict, WindowStats};

/// Starts the tasks on the current Tokio runtime.
pub fn spawn(state: &Arc<ClientState>) {
    let settings = state.health;
    let weak = Arc::downgrade(state);
    tokio::spawn(heartbeats(weak.clone(), settings));
    tokio::spawn(links(weak.clone(), state.links.clone(), settings));
    tokio::spawn(scoring(weak, state.changed.clone(), settings));
}

/// Starts re-dialling every endpoint that went away or is unreachable (and was not
/// removed by the scorer), when a link says a connection stopped taking requests and on
/// every heartbeat tick.
async fn links(state: Weak<ClientState>, watch: Arc<tokio::sync::Notify>, settings: Settings) {
    let mut tick = tokio::time::interval(settings.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = watch.notified() => {}
            _ = tick.tick() => {}
        }
        let Some(reg) = state.upgrade() else {
            return;
        };
        for ep in reg.all_endpoints() {
            let status = ep.health.status();
            if status.removed_at.is_none() && (status.unreachable || ep.link.away()) {
                super::redial::start(&reg, &ep);
            }
        }
    }
}

async fn heartbeats(state: Weak<ClientState>, settings: Settings) {
    let mut tick = tokio::time::interval(settings.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(reg) = state.upgrade() else {
            return;
        };
        let endpoints = reg.all_endpoints();
        let rounds = endpoints.iter().map(|ep| check(&reg, ep, settings));
        let changes = futures::future::join_all(rounds).await;
        announce(&reg, &endpoints, changes);
    }
}

/// One round now, dialling endpoints no call has dialled yet: a client that makes no
/// calls (`axle stats --manifest`) otherwise never learns whether its endpoints are up,
/// since heartbeats only go over connections that calls opened. A refused dial makes the
/// endpoint unreachable; a made one is heartbeaten like any other.
pub async fn reach_all(reg: &Arc<ClientState>) {
    let settings = reg.health;
    let endpoints = reg.all_endpoints();
    let rounds = endpoints.iter().map(|ep| reach(reg, ep, settings));
    let changes = futures::future::join_all(rounds).await;
    announce(reg, &endpoints, changes);
}

async fn reach(
    reg: &Arc<ClientState>,
    ep: &Arc<Endpoint>,
    settings: Settings,
) -> Option<HealthChange> {
    let status = ep.health.status();
    let never_dialled = ep.link.current().is_none() && !ep.link.lost();
    if never_dialled && !status.unreachable && status.removed_at.is_none() {
        if let Err(e) = ep.link.connection().await {
            tracing::debug!(endpoint = ep.id, "first dial: {e}");
            super::redial::start(reg, ep);
            return ep
                .health
                .mark_unreachable()
                .then_some(HealthChange::Unreachable);
        }
    }
    check(reg, ep, settings).await
}

/// Publishes the new rotation, then tells subscribers: whoever hears of a change finds the
/// rotation already reflecting it.
fn announce(reg: &ClientState, endpoints: &[Arc<Endpoint>], changes: Vec<Option<HealthChange>>) {
    if changes.iter().all(Option::is_none) {
        return;
    }
    reg.publish();
    for (ep, change) in endpoints.iter().zip(changes) {
        if let Some(change) = change {
            reg.event(ep, change);
        }
    }
}

/// One endpoint's heartbeat or probe; returns the change in its standing, if any.
/// Unreachable endpoints and lost connections are the re-dial task's (`redial.rs`).
async fn check(
    reg: &Arc<ClientState>,
    ep: &Arc<Endpoint>,
    settings: Settings,
) -> Option<HealthChange> {
    let status = ep.health.status();
    if status.removed_at.is_some() {
        if probe_due(&status, settings, now_ns()) {
            return probe(ep, settings).await;
        }
        return None;
    }
    if status.unreachable || ep.link.lost() {
        super::redial::start(reg, ep);
        return None;
    }
    if let Some(conn) = ep.link.current() {
        let answer = conn.heartbeat(settings.heartbeat_timeout).await;
        if heartbeat(&ep.health, answer.is_ok(), settings) {
            conn.close();
            super::redial::start(reg, ep);
            return Some(HealthChange::Unreachable);
        }
    }
    None
}

/// A removed endpoint's probe after its re-admission sleep: success re-admits it with a
/// clean record; failure keeps it out for another sleep.
async fn probe(ep: &Endpoint, settings: Settings) -> Option<HealthChange> {
    if super::redial::answers(ep, settings.heartbeat_timeout).await {
        super::redial::readmit(ep);
        return Some(HealthChange::Readmitted);
    }
    tracing::debug!(endpoint = ep.id, "probe failed");
    probe_failed(&ep.health);
    None
}

/// Whether a removed endpoint's re-admission sleep is over at `now` (kernel-clock ns).
pub fn probe_due(status: &Status, settings: Settings, now: u64) -> bool {
    status
        .removed_at
        .is_some_and(|at| now.saturating_sub(at) >= settings.readmit_sleep.as_nanos() as u64)
}

/// A removed endpoint's probe failed: it sleeps again from now.
pub fn probe_failed(health: &EndpointHealth) {
    health.update(|s| {
        if s.removed_at.is_some() {
            s.removed_at = Some(now_ns());
        }
    });
}

/// Records a heartbeat's answer; returns true when this loss made the endpoint
/// unreachable (`heartbeat-failures-dead` lost in a row): its connection must go.
pub fn heartbeat(health: &EndpointHealth, answered: bool, settings: Settings) -> bool {
    health.update(|s| {
        if answered {
            s.heartbeat_failures = 0;
            return false;
        }
        s.heartbeat_failures += 1;
        if s.heartbeat_failures >= settings.heartbeat_failures_dead {
            s.unreachable = true;
            return true;
        }
        false
    })
}

async fn scoring(state: Weak<ClientState>, changed: Arc<tokio::sync::Notify>, settings: Settings) {
    let mut tick = tokio::time::interval(settings.score_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = changed.notified() => {}
        }
        let Some(reg) = state.upgrade() else {
            return;
        };
        let endpoints = reg.all_endpoints();
        let scorer = reg.loadout.load().scorer.clone();
        let changes = match &scorer {
            Some(scorer) => endpoints
                .iter()
                .map(|ep| judge(scorer, ep.id, &ep.cell, &ep.health, settings))
                .collect(),
            None => Vec::new(),
        };
        // Publish on every tick: weights drift, and a refused connect seen on the call
        // path (which woke this task) changed the rotation.
        reg.publish();
        for (ep, change) in endpoints.iter().zip(changes) {
            if let Some(change) = change {
                reg.event(ep, change);
            }
        }
    }
}

/// Asks the scorer about one reachable, not removed endpoint and applies its verdict.
/// Takes the endpoint's parts rather than the endpoint, so `axle sim` judges its
/// simulated endpoints with this very function.
pub fn judge(
    scorer: &axle_plugin_host::kinds::health_scorer::HealthScorerPlugin,
    id: u32,
    cell: &EndpointCell,
    health: &EndpointHealth,
    settings: Settings,
) -> Option<HealthChange> {
    let status = health.status();
    if status.unreachable || status.removed_at.is_some() {
        return None;
    }
    let w = cell.window();
    let facts = cell.snapshot();
    let stats = WindowStats {
        endpoint: id,
        window_ms: axle_facts::WINDOW_MS,
        total: w.total,
        timeouts: w.timeouts,
        failures: w.failures,
        rejected: w.rejected,
        consecutive_failures: cell.consecutive_failures(),
        heartbeat_failures: status.heartbeat_failures,
        ewma_latency_ns: facts.ewma_latency_ns,
        previous: status.state,
    };
    let previous = Verdict {
        state: status.state,
        weight_permille: status.weight_permille,
    };
    let verdict = scorer.score(&stats, previous).verdict;
    cell.set_health_permille(verdict.weight_permille);
    health.update(|s| apply(s, verdict, settings))
}

/// Applies a verdict to a record; returns the change worth an event.
pub fn apply(s: &mut Status, v: Verdict, settings: Settings) -> Option<HealthChange> {
    let before = s.state;
    s.state = v.state;
    s.weight_permille = v.weight_permille;
    match v.state {
        HealthState::Healthy => {
            s.unhealthy_verdicts = 0;
            (before != HealthState::Healthy).then_some(HealthChange::Readmitted)
        }
        HealthState::Subhealthy => {
            s.unhealthy_verdicts += 1;
            if s.unhealthy_verdicts >= settings.unhealthy_times {
                s.removed_at = Some(now_ns());
                Some(HealthChange::Removed)
            } else {
                (before == HealthState::Healthy).then_some(HealthChange::Disabled)
            }
        }
        HealthState::Dead => {
            s.removed_at = Some(now_ns());
            Some(HealthChange::Removed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> Settings {
        Settings {
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(1),
            heartbeat_failures_dead: 3,
            score_interval: Duration::from_millis(500),
            unhealthy_times: 3,
            readmit_sleep: Duration::from_secs(30),
        }
    }

    fn verdict(state: HealthState) -> Verdict {
        Verdict {
            state,
            weight_permille: 600,
        }
    }

    #[test]
    fn subhealthy_disables_then_removes_after_n_verdicts() {
        let mut s = Status::default();
        let sub = verdict(HealthState::Subhealthy);
        assert_eq!(apply(&mut s, sub, settings()), Some(HealthChange::Disabled));
        assert_eq!(apply(&mut s, sub, settings()), None);
        assert!(s.removed_at.is_none());
        assert_eq!(apply(&mut s, sub, settings()), Some(HealthChange::Removed));
        assert!(s.removed_at.is_some());
        assert_eq!(s.weight_permille, 600);
    }

    #[test]
    fn a_healthy_verdict_resets_the_count() {
        let mut s = Status::default();
        let sub = verdict(HealthState::Subhealthy);
        apply(&mut s, sub, settings());
        apply(&mut s, sub, settings());
        assert_eq!(
            apply(&mut s, verdict(HealthState::Healthy), settings()),
            Some(HealthChange::Readmitted)
        );
        assert_eq!(s.unhealthy_verdicts, 0);
        assert_eq!(apply(&mut s, sub, settings()), Some(HealthChange::Disabled));
        assert!(s.removed_at.is_none());
    }

    #[test]
    fn dead_removes_at_once() {
        let mut s = Status::default();
        assert_eq!(
            apply(&mut s, verdict(HealthState::Dead), settings()),
            Some(HealthChange::Removed)
        );
        assert!(s.removed_at.is_some());
    }
}
