//! The caller's health monitor on simulated time, through the kernel's own decisions
//! (`axle_client::health`): every `health-interval-ms` the health-scorer plugin judges
//! each reachable endpoint's window and the verdict is applied (`monitor::judge`); every
//! `heartbeat-interval-ms` connected endpoints are heartbeaten (`monitor::heartbeat`),
//! unreachable ones re-dialled (`redial::answered_again`) and removed ones probed once
//! their re-admission sleep is over (`monitor::probe_due`, `redial::readmit_parts`,
//! `monitor::probe_failed`). Warm-up factors follow discovery's ramp
//! (`axle_discovery::warmup_permille`).

use std::time::Duration;

use axle_client::health::{monitor, redial, HealthChange};

use crate::caller::Kernel;
use crate::provider::Provider;

/// One scoring round at virtual `now_ms`; returns the changes, by endpoint.
pub fn score(k: &mut Kernel, providers: &[Provider], now_ms: u64) -> Vec<(u32, HealthChange)> {
    for (ep, p) in k.endpoints.iter().zip(providers) {
        let start = (p.warmup_ms > 0).then_some(p.started_ms);
        let permille =
            axle_discovery::warmup_permille(start, Duration::from_millis(p.warmup_ms), now_ms);
        ep.cell.set_warmup_permille(permille);
    }
    let mut changes = Vec::new();
    if let Some(scorer) = k.loadout.scorer.clone() {
        for ep in k.endpoints.iter().filter(|e| e.listed) {
            if let Some(change) = monitor::judge(&scorer, ep.id, &ep.cell, &ep.health, k.settings) {
                changes.push((ep.id, change));
            }
        }
    }
    // The kernel publishes on every scoring tick (weights drift).
    k.publish(providers);
    changes
}

/// One heartbeat round; returns the changes, by endpoint.
pub fn heartbeats(k: &mut Kernel, providers: &[Provider], now_ns: u64) -> Vec<(u32, HealthChange)> {
    let mut changes = Vec::new();
    for ep in k.endpoints.iter().filter(|e| e.listed) {
        let answers = providers[ep.id as usize].answers();
        let status = ep.health.status();
        if status.removed_at.is_some() {
            if monitor::probe_due(&status, k.settings, now_ns) {
                if answers {
                    redial::readmit_parts(&ep.cell, &ep.breaker, &ep.health);
                    changes.push((ep.id, HealthChange::Readmitted));
                } else {
                    monitor::probe_failed(&ep.health);
                }
            }
            continue;
        }
        if status.unreachable {
            // The re-dial task: back once it answers.
            if answers {
                if let Some(change) = redial::answered_again(&ep.cell, &ep.breaker, &ep.health) {
                    changes.push((ep.id, change));
                }
            }
            continue;
        }
        if monitor::heartbeat(&ep.health, answers, k.settings) {
            changes.push((ep.id, HealthChange::Unreachable));
        }
    }
    if !changes.is_empty() {
        k.publish(providers);
    }
    changes
}
