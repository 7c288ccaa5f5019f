//! The provider's protections per service/method: a concurrency guard (past
//! `max-concurrent` requests at once: `overloaded`, the handler does not run, the caller
//! fails over) and a fuse (`fuse-errors` unexpected errors within `fuse-window-ms`: the
//! method rejects for `fuse-sleep-ms`, also as `overloaded`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Governance;

struct Fuse {
    window_start: Instant,
    errors: u32,
    open_until: Option<Instant>,
}

/// The guard of one service/method.
pub struct Guard {
    max_concurrent: u32,
    in_flight: AtomicU32,
    /// Most requests seen at once (for `axle stats`).
    pub max_seen: AtomicU32,
    fuse_errors: u32,
    fuse_window: Duration,
    fuse_sleep: Duration,
    fuse: Mutex<Fuse>,
    /// Requests refused by the guard or the fuse.
    pub refused: AtomicU64,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Overloaded,
    Fused,
}

/// Holds a place among the requests in flight; releases it when dropped.
pub struct Entry<'a>(&'a Guard);

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

impl Guard {
    pub fn new(g: &Governance) -> Self {
        Guard {
            max_concurrent: g.max_concurrent,
            in_flight: AtomicU32::new(0),
            max_seen: AtomicU32::new(0),
            fuse_errors: g.fuse_errors,
            fuse_window: Duration::from_millis(g.fuse_window_ms),
            fuse_sleep: Duration::from_millis(g.fuse_sleep_ms),
            fuse: Mutex::new(Fuse {
                window_start: Instant::now(),
                errors: 0,
                open_until: None,
            }),
            refused: AtomicU64::new(0),
        }
    }

    /// Takes a place, or says why not.
    pub fn enter(&self) -> Result<Entry<'_>, Refusal> {
        if self.fuse_errors > 0 {
            let f = self.fuse.lock().unwrap_or_else(|e| e.into_inner());
            if f.open_until.is_some_and(|t| Instant::now() < t) {
                self.refused.fetch_add(1, Relaxed);
                return Err(Refusal::Fused);
            }
        }
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        if self.max_concurrent > 0 && now > self.max_concurrent {
            self.in_flight.fetch_sub(1, Relaxed);
            self.refused.fetch_add(1, Relaxed);
            return Err(Refusal::Overloaded);
        }
        // Read first: `fetch_max` is a locked compare-and-swap even when the peak stands.
        if now > self.max_seen.load(Relaxed) {
            self.max_seen.fetch_max(now, Relaxed);
        }
        Ok(Entry(self))
    }

    /// Requests inside the guard now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// An unexpected error (internal) happened in this method.
    pub fn unexpected_error(&self) {
        if self.fuse_errors == 0 {
            return;
        }
        let now = Instant::now();
        let mut f = self.fuse.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(f.window_start) > self.fuse_window {
            f.window_start = now;
            f.errors = 0;
        }
        f.errors += 1;
        if f.errors >= self.fuse_errors {
            tracing::warn!(
                "fuse blown: {} unexpected errors, rejecting for {:?}",
                f.errors,
                self.fuse_sleep
            );
            f.open_until = Some(now + self.fuse_sleep);
            f.errors = 0;
            f.window_start = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_concurrency_and_fuses_on_errors() {
        let g = Governance {
            max_concurrent: 2,
            fuse_errors: 3,
            fuse_sleep_ms: 30,
            ..Governance::default()
        };
        let guard = Guard::new(&g);
        let a = guard.enter().unwrap();
        let _b = guard.enter().unwrap();
        assert_eq!(guard.enter().err(), Some(Refusal::Overloaded));
        drop(a);
        let _c = guard.enter().unwrap();
        assert_eq!(guard.max_seen.load(Relaxed), 2);
        drop(_c);
        drop(_b);
        for _ in 0..3 {
            guard.unexpected_error();
        }
        assert_eq!(guard.enter().err(), Some(Refusal::Fused));
        std::thread::sleep(Duration::from_millis(40));
        assert!(guard.enter().is_ok(), "the fuse closes after its sleep");
        assert_eq!(guard.refused.load(Relaxed), 2);
    }
}
