//! The provider's open connections: counted against a cap, each with what eviction needs
//! (when it last carried a frame, how many requests it has in flight) and a way to tell
//! it to close. At the cap, a new connection displaces the longest-idle one with nothing
//! in flight; only when every connection is busy is the new one refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One open connection, as the registry and its own loop share it.
#[derive(Default)]
pub struct ConnState {
    /// `axle_core::now_ns` when a frame last arrived (or the connection opened).
    pub last_active_ns: AtomicU64,
    /// Requests it has in flight.
    pub in_flight: AtomicUsize,
    /// Set when it should close (evicted); `close` wakes its loop.
    pub(crate) evicted: AtomicBool,
    pub(crate) close: tokio::sync::Notify,
}

/// Every open connection of a provider.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
    /// Wakes [`Connections::wait_closed`] when one closes.
    left: tokio::sync::Notify,
}

/// A place in the registry; leaving it (drop) frees the place.
pub struct Admitted {
    registry: Arc<Connections>,
    id: u64,
    pub state: Arc<ConnState>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.registry
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.registry.left.notify_waiters();
    }
}

impl Connections {
    pub fn new() -> Arc<Connections> {
        Arc::default()
    }

    /// Admits a new connection under `max`: at the cap, the longest-idle connection with
    /// nothing in flight is told to close and the new one takes its place; `None` when
    /// every connection is busy (refuse the new one).
    pub fn admit(self: &Arc<Self>, max: usize) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        // Connections told to close still hold their place until they are gone; they are
        // not counted against the cap twice.
        let live = open.values().filter(|c| !c.evicted.load(Relaxed)).count();
        if live >= max.max(1) {
            let idlest = open
                .values()
                .filter(|c| !c.evicted.load(Relaxed) && c.in_flight.load(Relaxed) == 0)
                .min_by_key(|c| c.last_active_ns.load(Relaxed));
            match idlest {
                Some(c) => {
                    c.evicted.store(true, Relaxed);
                    c.close.notify_one();
                    self.evicted.fetch_add(1, Relaxed);
                }
                None => {
                    self.refused.fetch_add(1, Relaxed);
                    return None;
                }
            }
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        let state = Arc::new(ConnState::default());
        state.last_active_ns.store(axle_core::now_ns(), Relaxed);
        open.insert(id, state.clone());
        Some(Admitted {
            registry: self.clone(),
            id,
            state,
        })
    }

    /// Connections open now (including ones closing).
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Connections refused at the cap, and idle ones closed to make room, so far.
    pub fn refused_and_evicted(&self) -> (u64, u64) {
        (self.refused.load(Relaxed), self.evicted.load(Relaxed))
    }

    /// Waits until every connection has closed (their answers written), at most `limit`.
    pub async fn wait_closed(&self, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let left = self.left.notified();
            if self.open() == 0 {
                return true;
            }
            if tokio::time::timeout_at(until, left).await.is_err() {
                return self.open() == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_idlest_idle_connection_makes_room() {
        let r = Connections::new();
        let a = r.admit(2).unwrap();
        let b = r.admit(2).unwrap();
        a.state.last_active_ns.store(10, Relaxed);
        b.state.last_active_ns.store(5, Relaxed);
        b.state.in_flight.store(1, Relaxed);
        // b is older but busy: a goes.
        let c = r.admit(2).unwrap();
        assert!(a.state.evicted.load(Relaxed));
        assert!(!b.state.evicted.load(Relaxed));
        assert_eq!(r.refused_and_evicted(), (0, 1));
        // Now b and c are live; both busy: refused.
        c.state.in_flight.store(1, Relaxed);
        assert!(r.admit(2).is_none());
        assert_eq!(r.refused_and_evicted(), (1, 1));
        drop(a);
        assert_eq!(r.open(), 2);
    }
}
