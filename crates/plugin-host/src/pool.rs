//! The instances of one plugin, and how calls find one.
//!
//! Why this shape: every call needs `&mut Store`, so an instance serves one call at a time.
//! Stateful kinds (selector, router, health scorer, limiter) run ONE instance by default:
//! their state must be one per kernel — a token bucket split over N instances would admit
//! N times its rate, and N round-robin cursors would not visit endpoints in order. A
//! plugin call costs ~0.2 µs, so one guarded instance serves millions of calls per second,
//! far above what the request path around it can carry. Stateless serializers run one
//! instance per core (`instances` in the manifest overrides either), and a call takes the
//! first free one: `try_lock` in turn, starting at a per-thread offset so threads spread
//! out, then waits on its own shard.
//!
//! No caller waits for an instance longer than the plugin's `timeout-ms`: past that the
//! call is answered by the kind's safe default and counted as a `busy` fault. A call into
//! an instance is itself bounded by the same deadline, so a plugin that is slow or stuck
//! holds each caller for at most about twice its `timeout-ms` (a run-selector's ask, up to
//! four calls in one hold, makes a call after the first only within a quarter of it:
//! `kinds/selector/runs.rs`), never for the queue's
//! length — and a plugin in quarantine (`quarantine.rs`) is not waited for at all.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::stats::{Fault, PluginCounters, PluginStats};

/// Tries for a one-instance pool's lock before parking (about 10 µs of `pause`).
const SPINS: usize = 256;

/// A fixed set of members (instances, with what the kind keeps beside each).
pub struct Pool<S> {
    shards: Box<[Mutex<S>]>,
    /// Longest a caller waits for a free member.
    wait: Duration,
    stats: Arc<PluginStats>,
    name: Arc<str>,
}

fn home_shard(n: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: usize = NEXT.fetch_add(1, Relaxed);
    }
    HOME.with(|h| *h % n)
}

/// Who a pool belongs to: its plugin's name, counters and call deadline.
pub struct Owner {
    pub name: Arc<str>,
    pub stats: Arc<PluginStats>,
    pub timeout_ms: u64,
}

#[cfg(test)]
impl Owner {
    /// A plugin named `name` with counters of its own and a 100 ms call deadline (tests
    /// of a kind built on a native twin).
    pub fn named(name: &str) -> Owner {
        Owner {
            name: name.into(),
            stats: Arc::new(PluginStats::named(name)),
            timeout_ms: 100,
        }
    }
}

impl<S> Pool<S> {
    /// A pool of the given members (at least one).
    pub fn new(members: Vec<S>, owner: Owner) -> Self {
        assert!(!members.is_empty(), "a pool needs a member");
        Pool {
            shards: members.into_iter().map(Mutex::new).collect(),
            wait: Duration::from_millis(owner.timeout_ms),
            stats: owner.stats,
            name: owner.name,
        }
    }

    /// Runs `f` on a free member. `Err`: the plugin is in quarantine (counted as
    /// skipped), or no member came free within the wait (counted as a `busy` fault); the
    /// caller answers with its kind's safe default.
    pub fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> Result<R, Fault> {
        if !self.stats.quarantine.admits() {
            self.stats.fault(&Fault::Quarantined);
            return Err(Fault::Quarantined);
        }
        // Declared before any guard, so dropped after it: a replacement started under the
        // lock is handed to a rebuild thread once the lock is free (`rebuild.rs`).
        let _held = crate::rebuild::Held::enter();
        let n = self.shards.len();
        if n > 1 {
            let home = home_shard(n);
            for i in 0..n {
                if let Some(mut guard) = self.shards[(home + i) % n].try_lock() {
                    return Ok(f(&mut guard));
                }
            }
            return self.wait_for(&self.shards[home], f);
        }
        // One instance: a call holds it for about a microsecond, so spinning briefly
        // beats parking, whose wake-up costs a context switch on both sides.
        for _ in 0..SPINS {
            if let Some(mut guard) = self.shards[0].try_lock() {
                return Ok(f(&mut guard));
            }
            std::hint::spin_loop();
        }
        self.wait_for(&self.shards[0], f)
    }

    fn wait_for<R>(&self, shard: &Mutex<S>, f: impl FnOnce(&mut S) -> R) -> Result<R, Fault> {
        match shard.try_lock_for(self.wait) {
            Some(mut guard) => Ok(f(&mut guard)),
            None => {
                let count = self.stats.fault(&Fault::Busy);
                if count.is_power_of_two() {
                    tracing::warn!(
                        plugin = %self.name,
                        count,
                        "plugin busy past its timeout, answering with the safe default"
                    );
                }
                Err(Fault::Busy)
            }
        }
    }

    /// Runs `f` on a member without entering the plugin (reading what the kernel keeps
    /// beside an instance, to answer with the safe default), waiting as long as a call
    /// would; `None` if none came free.
    pub fn peek<R>(&self, f: impl FnOnce(&mut S) -> R) -> Option<R> {
        let _held = crate::rebuild::Held::enter();
        let shard = &self.shards[home_shard(self.shards.len())];
        shard.try_lock_for(self.wait).map(|mut guard| f(&mut guard))
    }

    /// The plugin's counters now.
    pub fn counters(&self) -> PluginCounters {
        PluginCounters {
            name: self.name.to_string(),
            stats: self.stats.snapshot(),
        }
    }

    /// Runs `f` on every member in turn (pushing a table to all instances). Waits for
    /// each: a member is held at most one call's deadline.
    pub fn each(&self, mut f: impl FnMut(&mut S)) {
        let _held = crate::rebuild::Held::enter();
        for shard in self.shards.iter() {
            f(&mut shard.lock());
        }
    }
}
