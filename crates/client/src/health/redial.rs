//! Bringing back endpoints that went away without a registry saying so: a provider
//! restarted in place (it said goaway and answered `shutting_down` while it drained, then
//! refused connections until it listened again), or one that shed a connection.
//!
//! One task per endpoint, started when its connection stops taking requests (the link's
//! watch, see `monitor`), when a call finds it going away or refusing, or when it is found
//! unreachable. The first dial goes at once: a provider that only shed a connection is
//! answered by a fresh one, and stays in rotation. Otherwise the endpoint leaves the
//! rotation and is re-dialled with jittered exponential backoff
//! (`RECONNECT_BACKOFF_MIN` doubling to `RECONNECT_BACKOFF_MAX`, ±50%); it is back as soon
//! as a new connection answers a heartbeat without a goaway. Endpoints the health scorer
//! removed are not re-admitted here: `readmit-sleep-ms` still runs for them (`monitor`).

use std::sync::atomic::Ordering::{AcqRel, Release};
use std::sync::{Arc, Weak};

use super::{EndpointHealth, HealthChange, Status};
use crate::state::{ClientState, Endpoint};
use axle_facts::EndpointCell;
use axle_governance::breaker::Breaker;
use axle_transport::defaults::{RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN};
use axle_transport::endpoint::jittered;

/// Starts re-dialling `ep` unless that is under way (or there is no runtime to do it on;
/// the monitor's next round starts it then).
pub fn start(state: &Arc<ClientState>, ep: &Arc<Endpoint>) {
    if ep.health.redialling.swap(true, AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        ep.health.redialling.store(false, Release);
        return;
    };
    let (state, ep) = (Arc::downgrade(state), ep.clone());
    runtime.spawn(async move {
        let _done = Done(&ep);
        run(state, &ep).await;
    });
}

/// Clears the endpoint's re-dialling flag however the task ends.
struct Done<'a>(&'a Endpoint);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.health.redialling.store(false, Release);
    }
}

async fn run(state: Weak<ClientState>, ep: &Arc<Endpoint>) {
    let mut delay = RECONNECT_BACKOFF_MIN;
    loop {
        // Stop when the client is gone or the endpoint left it.
        let timeout = match state.upgrade() {
            Some(reg) if reg.endpoint(ep.id).is_some_and(|e| Arc::ptr_eq(&e, ep)) => {
                reg.health.heartbeat_timeout
            }
            _ => return,
        };
        let answered = answers(ep, timeout).await;
        let Some(reg) = state.upgrade() else {
            return;
        };
        if answered {
            if let Some(change) = back(ep) {
                reg.publish();
                reg.event(ep, change);
            }
            return;
        }
        if ep.health.mark_unreachable() {
            reg.publish();
            reg.event(ep, HealthChange::Unreachable);
        }
        drop(reg);
        tokio::time::sleep(jittered(delay)).await;
        delay = (delay * 2).min(RECONNECT_BACKOFF_MAX);
    }
}

/// Whether `ep` takes requests again: a connection that is not going away (a new one if
/// need be, dialled now) answers a heartbeat. A stopping provider still accepting
/// connections sends its goaway first, so its pong finds the connection draining.
pub async fn answers(ep: &Endpoint, timeout: std::time::Duration) -> bool {
    let conn = match ep.link.redial().await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::debug!(endpoint = ep.id, "re-dial: {e}");
            return false;
        }
    };
    conn.heartbeat(timeout).await.is_ok() && conn.usable()
}

/// An endpoint that answered again: back in rotation with a clean record if it was out
/// for being unreachable (the change to announce); one the scorer removed stays out until
/// its re-admission sleep is over.
fn back(ep: &Endpoint) -> Option<HealthChange> {
    answered_again(&ep.cell, &ep.breaker, &ep.health)
}

/// [`back`] on an endpoint's parts (`axle sim` calls it on its simulated endpoints).
pub fn answered_again(
    cell: &EndpointCell,
    breaker: &Breaker,
    health: &EndpointHealth,
) -> Option<HealthChange> {
    let status = health.status();
    if status.unreachable && status.removed_at.is_none() {
        readmit_parts(cell, breaker, health);
        return Some(HealthChange::Readmitted);
    }
    health.update(|s| {
        s.unreachable = false;
        s.heartbeat_failures = 0;
    });
    None
}

/// Re-admits `ep` with a clean window, health factor, breaker and record.
pub fn readmit(ep: &Endpoint) {
    readmit_parts(&ep.cell, &ep.breaker, &ep.health);
}

/// [`readmit`] on an endpoint's parts.
pub fn readmit_parts(cell: &EndpointCell, breaker: &Breaker, health: &EndpointHealth) {
    cell.fresh_start();
    cell.set_health_permille(1000);
    breaker.reset();
    health.update(|s| *s = Status::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        let facts = axle_facts::FactsTable::new();
        let (id, cell) = facts.allocate("127.0.0.1:9", 100);
        let g = axle_governance::Governance::default();
        Endpoint {
            id,
            spec: arc_swap::ArcSwap::from_pointee(axle_manifest::EndpointSpec::new("127.0.0.1:9")),
            link: axle_transport::endpoint::EndpointLink::new(
                "127.0.0.1:9",
                axle_wire::Limits::default(),
                axle_transport::Keepalive::default(),
            ),
            cell,
            breaker: axle_governance::breaker::Breaker::new("e", (&g).into()),
            health: super::super::EndpointHealth::default(),
        }
    }

    #[test]
    fn an_unreachable_endpoint_that_answers_is_readmitted_clean() {
        let ep = endpoint();
        ep.health.update(|s| {
            s.unreachable = true;
            s.heartbeat_failures = 3;
        });
        assert_eq!(back(&ep), Some(HealthChange::Readmitted));
        let s = ep.health.status();
        assert!(!s.unreachable && s.heartbeat_failures == 0);
        // One that never left: nothing to announce.
        assert_eq!(back(&ep), None);
    }

    #[test]
    fn a_scorer_removed_endpoint_keeps_its_readmission_sleep() {
        let ep = endpoint();
        let removed = axle_core::now_ns();
        ep.health.update(|s| {
            s.unreachable = true;
            s.removed_at = Some(removed);
        });
        assert_eq!(back(&ep), None, "not re-admitted by answering");
        let s = ep.health.status();
        assert!(!s.unreachable, "reachable again");
        assert_eq!(s.removed_at, Some(removed), "still sleeping");
    }
}
