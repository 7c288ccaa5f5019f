//! Quarantine: a plugin that keeps faulting is taken out of the request path for a
//! cool-down, then probed with one real call.
//!
//! When [`TRIP_AFTER`] of the plugin's last [`WINDOW`] calls were answered by the safe
//! default because it faulted (a trap, a timeout, a wait, memory, a busy instance, an
//! invalid answer), calls skip the plugin for a cool-down of [`FIRST_COOLDOWN_MS`],
//! doubling on each repeated trip up to [`MAX_COOLDOWN_MS`]. A window, not a run: a plugin
//! whose own calls succeed while every other caller times out waiting for it is as broken
//! as one that traps, and one that faults on 1% of calls is not. When it ends one call goes through as a probe: a good
//! answer puts the plugin back in service (and resets the cool-down), a fault sends it
//! back with the next cool-down. Skipped calls get the kind's safe default at once, so a
//! broken plugin costs the request path a clock read, not a fault per call.
//!
//! The checks are atomics on the hot path: one load while the plugin is in service.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use axle_core::now_ns;

/// Faulted calls, among the last [`WINDOW`], that trip the quarantine.
pub const TRIP_AFTER: u32 = 10;
/// How many of the latest calls are looked at.
pub const WINDOW: u32 = 20;
/// The first cool-down, in ms.
pub const FIRST_COOLDOWN_MS: u64 = 1_000;
/// The longest cool-down, in ms.
pub const MAX_COOLDOWN_MS: u64 = 60_000;

/// The bits of [`WINDOW`] outcomes.
const MASK: u32 = (1 << WINDOW) - 1;

/// `until_ns` while the probe call is in flight.
const PROBING: u64 = u64::MAX;

/// One plugin's quarantine state.
#[derive(Debug)]
pub struct Quarantine {
    /// The latest [`WINDOW`] outcomes, newest in bit 0: 1 for a fault.
    history: AtomicU32,
    /// 0: in service; [`PROBING`]: the probe is in flight; else skip calls until then
    /// (kernel clock).
    until_ns: AtomicU64,
    cooldown_ms: AtomicU64,
    pub(crate) trips: AtomicU64,
    pub(crate) recoveries: AtomicU64,
}

impl Default for Quarantine {
    fn default() -> Self {
        Quarantine {
            history: AtomicU32::new(0),
            until_ns: AtomicU64::new(0),
            cooldown_ms: AtomicU64::new(FIRST_COOLDOWN_MS),
            trips: AtomicU64::new(0),
            recoveries: AtomicU64::new(0),
        }
    }
}

/// What a fault did to the quarantine.
#[derive(Debug, PartialEq, Eq)]
pub enum Tripped {
    No,
    /// Taken out of service for this many ms.
    For(u64),
}

impl Quarantine {
    /// Whether a call may go into the plugin now (while in quarantine: only the one probe
    /// once the cool-down is over).
    pub fn admits(&self) -> bool {
        let until = self.until_ns.load(Relaxed);
        if until == 0 {
            return true;
        }
        if until == PROBING || now_ns() < until {
            return false;
        }
        self.until_ns
            .compare_exchange(until, PROBING, Relaxed, Relaxed)
            .is_ok()
    }

    /// Whether calls skip the plugin now.
    pub fn active(&self) -> bool {
        self.until_ns.load(Relaxed) != 0
    }

    /// A call answered by the plugin. `true`: it was the probe, and the plugin is back.
    pub fn succeeded(&self) -> bool {
        // In service with no fault in the window: nothing to record (the common case is
        // one load).
        if self.history.load(Relaxed) != 0 {
            let _ = self
                .history
                .fetch_update(Relaxed, Relaxed, |h| Some((h << 1) & MASK));
        }
        if self.until_ns.load(Relaxed) == PROBING
            && self
                .until_ns
                .compare_exchange(PROBING, 0, Relaxed, Relaxed)
                .is_ok()
        {
            self.cooldown_ms.store(FIRST_COOLDOWN_MS, Relaxed);
            self.recoveries.fetch_add(1, Relaxed);
            return true;
        }
        false
    }

    /// A call the plugin faulted.
    pub fn faulted(&self) -> Tripped {
        let before = self
            .history
            .fetch_update(Relaxed, Relaxed, |h| Some(((h << 1) | 1) & MASK))
            .unwrap_or(0);
        let n = (((before << 1) | 1) & MASK).count_ones();
        let until = self.until_ns.load(Relaxed);
        let (from, cooldown) = if until == PROBING {
            let next = (self.cooldown_ms.load(Relaxed) * 2).min(MAX_COOLDOWN_MS);
            (PROBING, next)
        } else if until == 0 && n >= TRIP_AFTER {
            (0, self.cooldown_ms.load(Relaxed))
        } else {
            return Tripped::No;
        };
        let to = now_ns().saturating_add(cooldown * 1_000_000);
        if self
            .until_ns
            .compare_exchange(from, to, Relaxed, Relaxed)
            .is_err()
        {
            return Tripped::No;
        }
        self.cooldown_ms.store(cooldown, Relaxed);
        self.history.store(0, Relaxed);
        self.trips.fetch_add(1, Relaxed);
        Tripped::For(cooldown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_on_faults_in_the_window_probes_and_recovers() {
        let q = Quarantine::default();
        // One fault in a hundred calls never trips it.
        for i in 0..1_000 {
            if i % 100 == 0 {
                assert_eq!(q.faulted(), Tripped::No);
            } else {
                q.succeeded();
            }
        }
        // Faults interleaved with successes (the plugin answers its own calls while the
        // others time out waiting) do.
        for _ in 0..TRIP_AFTER - 1 {
            assert_eq!(q.faulted(), Tripped::No);
            q.succeeded();
        }
        assert_eq!(q.faulted(), Tripped::For(FIRST_COOLDOWN_MS));
        assert!(!q.admits(), "skipped during the cool-down");
        // The cool-down ends (as if time passed): one probe, then nobody else.
        q.until_ns.store(1, Relaxed);
        assert!(q.admits());
        assert!(!q.admits(), "one probe at a time");
        assert_eq!(q.faulted(), Tripped::For(2 * FIRST_COOLDOWN_MS), "doubled");
        q.until_ns.store(1, Relaxed);
        assert!(q.admits());
        assert!(q.succeeded(), "the probe answered: back in service");
        assert!(q.admits() && !q.active());
        assert_eq!(q.trips.load(Relaxed), 2);
        assert_eq!(q.recoveries.load(Relaxed), 1);
        assert_eq!(q.cooldown_ms.load(Relaxed), FIRST_COOLDOWN_MS, "reset");
    }
}
