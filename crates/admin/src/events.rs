//! Recent events, for the dashboard and anyone polling `GET /events?since=N`: endpoint
//! health changes (a client's health broadcast), method breakers opening and closing,
//! plugins entering and leaving quarantine (`watch.rs` notices them). Kept in a bounded
//! ring: a reader that fell behind by more than [`CAPACITY`] events is told how many it
//! missed, and the admin's memory never grows with the kernel's uptime.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::Targets;
use axle_server::Status;

/// Events kept; older ones are dropped first.
pub const CAPACITY: usize = 256;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Numbers events from 1, in the order they were recorded.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `health`, `breaker` or `plugin`.
    pub kind: &'static str,
    /// The client (or server) it happened in.
    pub owner: String,
    /// What changed: an endpoint's address, `service/method`, a plugin's name.
    pub subject: String,
    /// How: `unreachable`, `readmitted`, `open`, `closed`, `quarantined`, ...
    pub change: String,
}

/// The ring of recent events.
#[derive(Default)]
pub struct EventLog {
    inner: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// The last sequence number given.
    last: u64,
    events: VecDeque<Event>,
}

/// What a reader gets: the events after the sequence number it gave, how many of those
/// were already dropped, and the number to ask from next.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Page {
    pub events: Vec<Event>,
    pub missed: u64,
    pub next: u64,
}

impl EventLog {
    /// Records an event now.
    pub fn record(&self, kind: &'static str, owner: &str, subject: &str, change: &str) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut ring = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        ring.last += 1;
        let event = Event {
            seq: ring.last,
            at_ms,
            kind,
            owner: owner.to_string(),
            subject: subject.to_string(),
            change: change.to_string(),
        };
        if ring.events.len() == CAPACITY {
            ring.events.pop_front();
        }
        ring.events.push_back(event);
    }

    /// The events whose sequence number is above `since` (0: all that are kept).
    pub fn since(&self, since: u64) -> Page {
        let ring = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let events: Vec<Event> = ring
            .events
            .iter()
            .filter(|e| e.seq > since)
            .cloned()
            .collect();
        let first_kept = ring.events.front().map_or(ring.last + 1, |e| e.seq);
        Page {
            missed: first_kept.saturating_sub(since + 1),
            next: ring.last,
            events,
        }
    }
}

/// The `events` method: `{"since": N}` (or nothing: every event kept) answers a
/// [`Page`].
pub async fn events(targets: Arc<Targets>, body: Value) -> Result<Value, Status> {
    let since = match &body {
        Value::Null => 0,
        Value::Object(o) => match o.get("since") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                Status::bad_request(format!("`since` is a whole number ≥ 0, not {v}"))
            })?,
        },
        other => {
            return Err(Status::bad_request(format!(
                "events takes {{\"since\": N}}, not {other}"
            )))
        }
    };
    serde_json::to_value(targets.events.since(since))
        .map_err(|e| Status::internal(format!("cannot encode the events: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_what_came_after_its_number_and_learns_what_it_missed() {
        let log = EventLog::default();
        assert_eq!(
            log.since(0),
            Page {
                events: vec![],
                missed: 0,
                next: 0
            }
        );
        log.record("health", "demo", "127.0.0.1:1", "unreachable");
        log.record("breaker", "demo", "flaky/*", "open");
        let page = log.since(0);
        assert_eq!(page.events.len(), 2);
        assert_eq!((page.missed, page.next), (0, 2));
        assert_eq!(page.events[1].subject, "flaky/*");
        let later = log.since(1);
        assert_eq!(later.events.len(), 1);
        assert_eq!(later.events[0].seq, 2);
        assert!(log.since(2).events.is_empty());
        assert!(log.since(99).events.is_empty(), "a number from the future");
    }

    #[test]
    fn the_ring_is_bounded_and_counts_the_dropped() {
        let log = EventLog::default();
        for i in 0..CAPACITY + 10 {
            log.record("health", "demo", &format!("ep{i}"), "unreachable");
        }
        let page = log.since(0);
        assert_eq!(page.events.len(), CAPACITY);
        assert_eq!(page.missed, 10);
        assert_eq!(page.events[0].seq, 11);
        assert_eq!(page.next, (CAPACITY + 10) as u64);
        assert_eq!(log.since(5).missed, 5);
        assert_eq!(log.since(20).missed, 0);
    }

    #[tokio::test]
    async fn the_method_reads_since_and_refuses_a_bad_one() {
        let targets = Arc::new(Targets::default());
        targets
            .events
            .record("plugin", "demo", "p2c-ewma", "quarantined");
        let all = events(targets.clone(), Value::Null).await.unwrap();
        assert_eq!(all["events"][0]["change"], "quarantined");
        let none = events(targets.clone(), serde_json::json!({"since": 1}))
            .await
            .unwrap();
        assert_eq!(none["events"], serde_json::json!([]));
        assert_eq!(none["next"], 1);
        for bad in [serde_json::json!({"since": -1}), serde_json::json!("x")] {
            let e = events(targets.clone(), bad).await.unwrap_err();
            assert_eq!(e.class, axle_wire::ErrorClass::BadRequest, "{e:?}");
        }
    }
}
