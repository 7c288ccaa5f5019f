//! The instances of one plugin, and how calls find one.
//!
//! Why this shape: every call needs `&mut Store`, so an instance serves one call at a time.
//! Stateful kinds (selector, router, health scorer, limiter) run ONE instance by default:
//! their state must be one per kernel — a token bucket split over N instances would admit
//! N times its rate, and N round-robin cursors would not visit endpoints in order. A
//! plugin call costs ~0.2 µs, so one mutex-guarded instance serves millions of calls per
//! second, far above what the request path around it can carry. Stateless serializers run
//! one instance per core (`instances` in the manifest overrides either), and a call takes
//! the first free one: `try_lock` in turn, starting at a per-thread offset so threads
//! spread out, then waits on its own shard only if all are busy.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// A fixed set of members (instances, with what the kind keeps beside each).
pub struct Pool<S> {
    shards: Box<[Mutex<S>]>,
}

fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    // A panic while holding the lock cannot leave a member half-updated in a way that
    // matters more than losing the kernel: keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn home_shard(n: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: usize = NEXT.fetch_add(1, Relaxed);
    }
    HOME.with(|h| *h % n)
}

impl<S> Pool<S> {
    /// A pool of the given members (at least one).
    pub fn new(members: Vec<S>) -> Self {
        assert!(!members.is_empty(), "a pool needs a member");
        Pool {
            shards: members.into_iter().map(Mutex::new).collect(),
        }
    }

    /// Runs `f` on a free member.
    pub fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        let n = self.shards.len();
        if n == 1 {
            return f(&mut lock(&self.shards[0]));
        }
        let home = home_shard(n);
        for i in 0..n {
            if let Ok(mut guard) = self.shards[(home + i) % n].try_lock() {
                return f(&mut guard);
            }
        }
        f(&mut lock(&self.shards[home]))
    }

    /// Runs `f` on every member in turn (pushing a table to all instances).
    pub fn each(&self, mut f: impl FnMut(&mut S)) {
        for shard in self.shards.iter() {
            f(&mut lock(shard));
        }
    }
}
