//! A sliding window of call outcomes: [`BUCKETS`] one-second buckets in a ring, each
//! counting outcomes by class and latencies in a log-scale histogram. Recording is a few
//! relaxed atomic adds; a bucket is started afresh by whoever first records into it in a
//! new second (counts racing with that may land in the old second: a window is an
//! estimate, and a lock on every call would cost more than the precision is worth).
//!
//! Sliding rather than tumbling: a tumbling window forgets everything at once, so right
//! after each reset every endpoint is "below the minimum samples" and its verdict freezes.
//!
//! A bucket's class counts only grow: a new second sets a base at what they hold, and the
//! window counts what they gained since. So the ring also holds the endpoint's totals
//! since it appeared, exactly (the sum of every bucket's counts), and a finished call
//! adds to the bucket alone, not also to totals of their own on another line that every
//! core's calls write (`docs/performance.md`, "Totals kept by the window").

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use axle_spi::OutcomeClass;

/// Buckets in the ring (the window is this many seconds long).
pub const BUCKETS: usize = 10;

/// Length of one bucket.
const BUCKET_NS: u64 = 1_000_000_000;

/// Latency histogram buckets: two per power of two of microseconds, up to ~36 minutes.
const LATENCY_BUCKETS: usize = 64;

/// The window's length in milliseconds.
pub const WINDOW_MS: u32 = (BUCKETS as u64 * BUCKET_NS / 1_000_000) as u32;

struct Bucket {
    /// Which second (since the kernel started) this bucket counts; `u64::MAX` when unused.
    second: AtomicU64,
    /// Calls ever counted here, by class (only growing).
    classes: Classes,
    /// What `classes` held when this bucket's second began.
    base: Classes,
    latency: [AtomicU32; LATENCY_BUCKETS],
}

/// Finished calls by class.
#[derive(Default)]
struct Classes {
    total: AtomicU64,
    timeouts: AtomicU64,
    failures: AtomicU64,
    rejected: AtomicU64,
}

impl Classes {
    fn each(&self) -> [&AtomicU64; 4] {
        [&self.total, &self.timeouts, &self.failures, &self.rejected]
    }

    /// Total, timeouts, failures, rejected.
    fn read(&self) -> [u64; 4] {
        self.each().map(|c| c.load(Relaxed))
    }
}

impl Bucket {
    fn new() -> Self {
        Bucket {
            second: AtomicU64::new(u64::MAX),
            classes: Classes::default(),
            base: Classes::default(),
            latency: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Starts the bucket afresh: its class counts from here, no latencies.
    fn restart(&self) {
        for (base, now) in self.base.each().into_iter().zip(self.classes.read()) {
            base.store(now, Relaxed);
        }
        for l in &self.latency {
            l.store(0, Relaxed);
        }
    }

    /// Total, timeouts, failures, rejected since the bucket's second began.
    fn window_classes(&self) -> [u32; 4] {
        let (now, base) = (self.classes.read(), self.base.read());
        std::array::from_fn(|i| u32::try_from(now[i].saturating_sub(base[i])).unwrap_or(u32::MAX))
    }
}

/// What the window holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Calls finished in the window.
    pub total: u32,
    /// Of those: timeouts.
    pub timeouts: u32,
    /// Of those: other endpoint faults (connection errors, internal errors).
    pub failures: u32,
    /// Of those: refused without running (overloaded, shutting down, rate limited).
    pub rejected: u32,
    /// Latency percentiles over the window, nanoseconds (upper bounds of their histogram
    /// bucket, so within ~41% above the truth; 0 when the window is empty).
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
}

/// The ring of buckets.
pub struct Window {
    buckets: [Bucket; BUCKETS],
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window").finish_non_exhaustive()
    }
}

impl Default for Window {
    fn default() -> Self {
        Window {
            buckets: std::array::from_fn(|_| Bucket::new()),
        }
    }
}

/// The histogram bucket of a latency: two per power of two of microseconds.
fn latency_bucket(latency_ns: u64) -> usize {
    let us = latency_ns >> 10;
    if us == 0 {
        return 0;
    }
    let msb = 63 - us.leading_zeros() as usize;
    let half = if msb == 0 {
        0
    } else {
        ((us >> (msb - 1)) & 1) as usize
    };
    (1 + 2 * msb + half).min(LATENCY_BUCKETS - 1)
}

/// The upper bound of a histogram bucket, nanoseconds.
fn bucket_upper_ns(index: usize) -> u64 {
    if index == 0 {
        return 1 << 10;
    }
    let msb = (index - 1) / 2;
    let half = (index - 1) % 2;
    // Bucket (msb, half) holds [2^msb * (1 + half/2), 2^msb * (1.5 + half/2)) µs.
    let upper_us = if msb == 0 {
        2
    } else {
        (1u64 << msb) + (1u64 << (msb - 1)) * (half as u64 + 1)
    };
    upper_us << 10
}

impl Window {
    /// Counts one finished call.
    pub fn record(&self, now_ns: u64, class: OutcomeClass, latency_ns: u64) {
        let second = now_ns / BUCKET_NS;
        let b = &self.buckets[(second % BUCKETS as u64) as usize];
        let seen = b.second.load(Relaxed);
        if seen != second
            && b.second
                .compare_exchange(seen, second, Relaxed, Relaxed)
                .is_ok()
        {
            b.restart();
        }
        b.classes.total.fetch_add(1, Relaxed);
        match class {
            OutcomeClass::Success => {}
            OutcomeClass::Timeout => {
                b.classes.timeouts.fetch_add(1, Relaxed);
            }
            OutcomeClass::Failure => {
                b.classes.failures.fetch_add(1, Relaxed);
            }
            OutcomeClass::Rejected => {
                b.classes.rejected.fetch_add(1, Relaxed);
            }
        }
        b.latency[latency_bucket(latency_ns)].fetch_add(1, Relaxed);
    }

    /// Forgets the window (a re-admitted endpoint starts with a clean record); the totals
    /// since the endpoint appeared stay.
    pub fn clear(&self) {
        for b in &self.buckets {
            b.second.store(u64::MAX, Relaxed);
            b.restart();
        }
    }

    /// Calls finished and endpoint faults (timeouts + failures) among them, since the
    /// window was made: every bucket's counts, in the window or not.
    pub fn totals(&self) -> (u64, u64) {
        self.buckets.iter().fold((0, 0), |(calls, faults), b| {
            let [total, timeouts, failures, _] = b.classes.read();
            (calls + total, faults + timeouts + failures)
        })
    }

    /// Total and endpoint faults (timeouts + failures) in the window: the cheap read.
    pub fn total_and_faults(&self, now_ns: u64) -> (u32, u32) {
        let mut total = 0u32;
        let mut faults = 0u32;
        for b in self.live(now_ns) {
            let [t, timeouts, failures, _] = b.window_classes();
            total = total.saturating_add(t);
            faults = faults.saturating_add(timeouts).saturating_add(failures);
        }
        (total, faults)
    }

    /// Everything the window holds.
    pub fn counts(&self, now_ns: u64) -> WindowCounts {
        let mut c = WindowCounts::default();
        let mut hist = [0u64; LATENCY_BUCKETS];
        for b in self.live(now_ns) {
            let [total, timeouts, failures, rejected] = b.window_classes();
            c.total = c.total.saturating_add(total);
            c.timeouts = c.timeouts.saturating_add(timeouts);
            c.failures = c.failures.saturating_add(failures);
            c.rejected = c.rejected.saturating_add(rejected);
            for (h, l) in hist.iter_mut().zip(&b.latency) {
                *h += u64::from(l.load(Relaxed));
            }
        }
        let n: u64 = hist.iter().sum();
        let percentile = |q: f64| -> u64 {
            if n == 0 {
                return 0;
            }
            let rank = ((n as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, h) in hist.iter().enumerate() {
                seen += h;
                if seen >= rank {
                    return bucket_upper_ns(i);
                }
            }
            bucket_upper_ns(LATENCY_BUCKETS - 1)
        };
        c.p50_ns = percentile(0.50);
        c.p90_ns = percentile(0.90);
        c.p99_ns = percentile(0.99);
        c
    }

    /// The buckets whose second lies within the window ending at `now_ns`.
    fn live(&self, now_ns: u64) -> impl Iterator<Item = &Bucket> {
        let now_s = now_ns / BUCKET_NS;
        self.buckets.iter().filter(move |b| {
            let s = b.second.load(Relaxed);
            s != u64::MAX && s <= now_s && now_s - s < BUCKETS as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = BUCKET_NS;

    #[test]
    fn counts_by_class_and_slides() {
        let w = Window::default();
        w.record(0, OutcomeClass::Success, 1_000_000);
        w.record(S, OutcomeClass::Timeout, 1_000_000);
        w.record(2 * S, OutcomeClass::Failure, 1_000_000);
        w.record(3 * S, OutcomeClass::Rejected, 1_000_000);
        let c = w.counts(3 * S);
        assert_eq!((c.total, c.timeouts, c.failures, c.rejected), (4, 1, 1, 1));
        assert_eq!(w.total_and_faults(3 * S), (4, 2));
        // Ten seconds after the first: it has slid out, the rest remain.
        assert_eq!(w.counts(10 * S).total, 3);
        assert_eq!(w.counts(13 * S).total, 0);
        // A new second reuses the ring slot and starts from zero.
        w.record(10 * S, OutcomeClass::Success, 5);
        assert_eq!(w.counts(10 * S).total, 4);
        assert_eq!(w.totals(), (5, 2), "the second that slid out still counts");
        w.clear();
        assert_eq!(w.counts(10 * S), WindowCounts::default());
        assert_eq!(w.totals(), (5, 2), "totals outlive the window");
        w.record(10 * S, OutcomeClass::Failure, 5);
        assert_eq!(w.counts(10 * S).failures, 1);
        assert_eq!(w.totals(), (6, 3));
    }

    /// Calls from every thread, across seconds that reuse the ring's buckets while they
    /// run: the window may lose counts to a new second's start, the totals never do.
    #[test]
    fn totals_are_exact_across_threads_and_reused_buckets() {
        let w = Window::default();
        let (threads, calls) = (4u64, 20_000u64);
        std::thread::scope(|s| {
            for t in 0..threads {
                let w = &w;
                s.spawn(move || {
                    for i in 0..calls {
                        // Each call a different tenth of a second: every bucket is reused
                        // many times, by all threads at once.
                        let now = (i * threads + t) * S / 10;
                        let class = if i % 5 == 0 {
                            OutcomeClass::Timeout
                        } else {
                            OutcomeClass::Success
                        };
                        w.record(now, class, 1_000);
                    }
                });
            }
        });
        assert_eq!(w.totals(), (threads * calls, threads * calls / 5));
    }

    #[test]
    fn percentiles_bound_the_truth_within_a_bucket() {
        let w = Window::default();
        for i in 1..=100u64 {
            w.record(0, OutcomeClass::Success, i * 1_000_000);
        }
        let c = w.counts(0);
        for (got, truth) in [(c.p50_ns, 50_000_000u64), (c.p99_ns, 99_000_000)] {
            assert!(got >= truth && got <= truth * 3 / 2, "{got} vs {truth}");
        }
        assert!(c.p50_ns <= c.p90_ns && c.p90_ns <= c.p99_ns);
    }

    #[test]
    fn latency_buckets_are_monotonic() {
        let mut last = 0;
        for ns in (0..40).map(|p| 1u64 << p) {
            let b = latency_bucket(ns);
            assert!(b >= last);
            assert!(bucket_upper_ns(b) > ns, "{ns} -> {b}");
            last = b;
        }
    }
}
