//! What fills the event ring (`events.rs`) while the admin endpoint runs: one task per
//! exposed client forwarding its health broadcast as it happens, and one task reading
//! breaker states and plugin quarantine twice a second and recording each change. Those
//! two have no broadcast of their own; reading them from here keeps the request path
//! as it is (nothing is sent per call), at the cost of noticing a change up to half a
//! second late. The tasks stop with the admin endpoint.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::events::EventLog;
use crate::Targets;
use axle_client::health::HealthChange;

/// How often breaker states and quarantine flags are read.
const POLL: Duration = Duration::from_millis(500);

/// The running watchers; dropping them stops them.
pub struct Watchers(Vec<JoinHandle<()>>);

impl Drop for Watchers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts the watchers of `targets`.
pub fn start(targets: &Arc<Targets>) -> Watchers {
    let mut tasks: Vec<JoinHandle<()>> = targets
        .clients
        .iter()
        .map(|(name, client)| {
            let (name, events, log) =
                (name.clone(), client.health_events(), targets.events.clone());
            tokio::spawn(health(name, events, log))
        })
        .collect();
    tasks.push(tokio::spawn(poll(targets.clone())));
    Watchers(tasks)
}

/// Forwards one client's health events until the client is gone.
async fn health(
    owner: String,
    mut events: tokio::sync::broadcast::Receiver<axle_client::health::HealthEvent>,
    log: Arc<EventLog>,
) {
    loop {
        match events.recv().await {
            Ok(e) => log.record("health", &owner, &e.address, change_name(&e.change)),
            Err(RecvError::Lagged(n)) => {
                log.record("health", &owner, "*", &format!("{n} events lost (lagging)"))
            }
            Err(RecvError::Closed) => return,
        }
    }
}

fn change_name(change: &HealthChange) -> &'static str {
    match change {
        HealthChange::Disabled => "disabled",
        HealthChange::Removed => "removed",
        HealthChange::Unreachable => "unreachable",
        HealthChange::Readmitted => "readmitted",
    }
}

/// What was last seen: (kind, owner, subject) → state.
type Seen = BTreeMap<(&'static str, String, String), String>;

/// Reads breakers and quarantine every [`POLL`], recording changes (the first reading
/// only sets what is normal: a breaker not closed, a plugin already in quarantine, is
/// recorded then too).
async fn poll(targets: Arc<Targets>) {
    let mut seen = Seen::new();
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for (state, change) in read(&targets) {
            let (kind, owner, subject) = &state;
            let before = seen.get(&state).map(String::as_str);
            let normal = if *kind == "breaker" {
                "closed"
            } else {
                IN_SERVICE
            };
            if before != Some(change.as_str()) && (before.is_some() || change != normal) {
                targets.events.record(kind, owner, subject, &change);
            }
            seen.insert(state, change);
        }
    }
}

/// Every breaker and plugin now: ((kind, owner, subject), state).
fn read(targets: &Targets) -> Vec<((&'static str, String, String), String)> {
    let mut out = Vec::new();
    for (owner, client) in &targets.clients {
        for svc in client.services() {
            for p in &svc.policies {
                let subject = format!("{}/{}", svc.service, p.method);
                out.push((("breaker", owner.clone(), subject), p.breaker.clone()));
            }
        }
        for p in client.plugins() {
            let state = quarantine(p.stats.quarantined);
            out.push((("plugin", owner.clone(), p.name), state));
        }
    }
    for (owner, server) in &targets.servers {
        for p in server.plugins() {
            let state = quarantine(p.stats.quarantined);
            out.push((("plugin", owner.clone(), p.name), state));
        }
    }
    out
}

/// A plugin's state when it is not in quarantine.
const IN_SERVICE: &str = "in service";

fn quarantine(quarantined: bool) -> String {
    if quarantined {
        "quarantined"
    } else {
        IN_SERVICE
    }
    .to_string()
}
