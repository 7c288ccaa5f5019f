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

use super::{HealthChange, Status};
use crate::state::{ClientState, Endpoint};
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
    let status = ep.health.status();
    if status.unreachable && status.removed_at.is_none() {
        readmit(ep);
        return Some(HealthChange::Readmitted);
    }
    ep.health.update(|s| {
        s.unreachable = false;
        s.heartbeat_failures = 0;
    });
    None
}

/// Re-admits `ep` with a clean window, health factor, breaker and record.
pub fn readmit(ep: &Endpoint) {
    ep.cell.fresh_start();
    ep.cell.set_health_permille(1000);
    ep.breaker.reset();
    ep.health.update(|s| *s = Status::default());
}
