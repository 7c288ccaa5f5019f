//! The kernel clock: monotonic nanoseconds since the process started. Facts, health,
//! transports and plugins (`host.now-ns`) all read this one clock, so their times compare.
//!
//! A simulator (`axle sim`) may install a **virtual clock** for the whole process: from
//! then on `now_ns()` answers the simulated time it sets, so the kernel's own facts,
//! breakers, budgets, health records and the plugins decide on simulated time. The real
//! path pays one relaxed load for that. Only one simulation can own the clock at a time
//! ([`VirtualClock::install`] waits for the previous owner to let go).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// Whether a virtual clock is installed.
static VIRTUAL: AtomicBool = AtomicBool::new(false);
/// The virtual clock's time, in nanoseconds.
static VIRTUAL_NS: AtomicU64 = AtomicU64::new(0);
/// Held by the one owner of the virtual clock.
static OWNER: Mutex<()> = Mutex::new(());

/// Monotonic nanoseconds since the kernel started: the clock plugins see.
#[inline]
pub fn now_ns() -> u64 {
    if VIRTUAL.load(Relaxed) {
        return VIRTUAL_NS.load(Relaxed);
    }
    real_ns()
}

/// The kernel clock at `at`, a reading of `Instant::now()` the caller already has: a path
/// that needs both an `Instant` (a deadline, a latency) and the kernel clock (facts) reads
/// the clock once. Under a virtual clock, its time, as [`now_ns`] answers.
#[inline]
pub fn ns_at(at: Instant) -> u64 {
    if VIRTUAL.load(Relaxed) {
        return VIRTUAL_NS.load(Relaxed);
    }
    at.saturating_duration_since(*start()).as_nanos() as u64
}

fn real_ns() -> u64 {
    start().elapsed().as_nanos() as u64
}

/// When the kernel clock reads 0.
fn start() -> &'static Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now)
}

/// The process's virtual clock while this guard lives; the real clock again once it is
/// dropped.
pub struct VirtualClock {
    _owner: MutexGuard<'static, ()>,
}

impl VirtualClock {
    /// Installs a virtual clock reading `start_ns`. Blocks while another owner holds it
    /// (two simulations in one process, e.g. parallel tests, take turns).
    pub fn install(start_ns: u64) -> VirtualClock {
        let owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
        VIRTUAL_NS.store(start_ns, Relaxed);
        VIRTUAL.store(true, Relaxed);
        VirtualClock { _owner: owner }
    }

    /// Moves the clock to `ns` (never backwards: a smaller value is ignored).
    pub fn set(&self, ns: u64) {
        VIRTUAL_NS.fetch_max(ns, Relaxed);
    }

    /// The virtual time now.
    pub fn now(&self) -> u64 {
        VIRTUAL_NS.load(Relaxed)
    }
}

impl Drop for VirtualClock {
    fn drop(&mut self) {
        VIRTUAL.store(false, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_goes_back() {
        // Not while the other test has a virtual clock installed.
        let _alone = OWNER.lock().unwrap_or_else(|e| e.into_inner());
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
    }

    #[test]
    fn a_reading_taken_by_the_caller_is_the_same_clock() {
        let _alone = OWNER.lock().unwrap_or_else(|e| e.into_inner());
        let before = now_ns();
        let at = ns_at(Instant::now());
        let after = now_ns();
        assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
        // A reading from before the clock started counts as its start.
        if let Some(early) = start().checked_sub(std::time::Duration::from_millis(1)) {
            assert_eq!(ns_at(early), 0);
        }
    }

    #[test]
    fn a_virtual_clock_answers_while_installed() {
        let clock = VirtualClock::install(5_000);
        assert_eq!(now_ns(), 5_000);
        clock.set(9_000);
        clock.set(1_000);
        assert_eq!(now_ns(), 9_000, "never backwards");
        assert_eq!(
            ns_at(Instant::now()),
            9_000,
            "a caller's reading is virtual too"
        );
        drop(clock);
        // The real clock again (it started with the process, not at 9 µs of virtual time
        // necessarily, so only check it moves on).
        let a = now_ns();
        assert!(now_ns() >= a);
    }
}
