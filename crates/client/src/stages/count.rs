//! What a method's calls came to, counted where each fact is born: the call's end (its
//! outcome by class and its latency, in `pipeline.rs`), each retry, failover and hedge
//! sent, each one the retry budget refused. One set per method policy (a declared
//! method's own, `*` for every other name: bounded, never created by a call), kept across
//! swaps; relaxed atomics and the project's one histogram, kept per thread, so counting
//! costs a few adds to lines the core already holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use axle_core::latency::{Exported, Latency};
use axle_core::striped::Striped;
use axle_transport::TransportError;
use axle_wire::ErrorClass;

use crate::CallError;

/// Every class a call can end in, as [`CallError::class`] names it: the wire's nine, then
/// the caller's own.
pub const CLASSES: [&str; 13] = [
    "business",
    "overloaded",
    "shutting_down",
    "rate_limited",
    "deadline_exceeded",
    "not_found",
    "bad_request",
    "forbidden",
    "internal",
    "no_endpoint",
    "breaker_open",
    "bad_response",
    "transport",
];

/// The index of `err`'s class in [`CLASSES`] (no string compared on the call path).
fn class_index(err: &CallError) -> usize {
    let wire = |class: ErrorClass| class as usize - 1;
    match err {
        CallError::Remote { class, .. } | CallError::Intercepted { class, .. } => wire(*class),
        CallError::NoSuchService(_) => wire(ErrorClass::NotFound),
        CallError::Encode(_) => wire(ErrorClass::BadRequest),
        CallError::Transport(TransportError::Timeout) => wire(ErrorClass::DeadlineExceeded),
        CallError::NoEndpoint { .. } => 9,
        CallError::BreakerOpen { .. } => 10,
        CallError::Decode(_) => 11,
        CallError::Transport(_) => 12,
    }
}

/// One method policy's counters.
#[derive(Default)]
pub struct CallCounters {
    /// `monitor = false`: nothing is counted (set when the policy is resolved; one load
    /// and one branch per count).
    off: AtomicBool,
    /// Kept per thread: every call of the method writes them, from every core
    /// (`axle_core::striped`).
    counts: Striped<Counts>,
}

/// One thread's share of a method's counts.
#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    ok: AtomicU64,
    errors: [AtomicU64; CLASSES.len()],
    retries: AtomicU64,
    failovers: AtomicU64,
    hedges: AtomicU64,
    budget_refused: AtomicU64,
    fallbacks: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    latency: Latency,
}

/// A copy of [`CallCounters`], for people and `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallCounts {
    /// Calls made (before any fallback answered them).
    pub calls: u64,
    pub ok: u64,
    /// Failed calls by class (absent: none).
    pub errors: BTreeMap<String, u64>,
    /// Attempts sent again after a failure that may have run the handler (idempotent).
    pub retries: u64,
    /// Attempts sent to another endpoint after a refusal or a connection that never
    /// carried the request.
    pub failovers: u64,
    /// Backup requests sent (hedging).
    pub hedges: u64,
    /// Retries, failovers and hedges not sent because the retry budget was spent.
    pub retry_budget_refused: u64,
    /// Failed calls the method's fallback answered.
    pub fallbacks: u64,
    /// Calls answered from the method's result cache (not counted as calls: nothing was
    /// sent).
    #[serde(default)]
    pub cache_hits: u64,
    /// Calls the method's result cache could not answer (then sent as usual).
    #[serde(default)]
    pub cache_misses: u64,
    /// Call latency, all attempts included.
    pub latency_histogram: Exported,
}

impl CallCounters {
    /// Counting on (`monitor = true`, the default) or off; kept across swaps like the
    /// counts, so the latest policy decides.
    pub fn monitor(&self, on: bool) {
        self.off.store(!on, Relaxed);
    }

    /// Adds one to the counter `which` picks unless monitoring is off.
    fn add(&self, which: impl FnOnce(&Counts) -> &AtomicU64) {
        if !self.off.load(Relaxed) {
            let (c, w) = self.counts.local_counts();
            w.add(which(c), 1);
        }
    }

    /// A call ended (before its fallback) after `ns`.
    pub fn ended<T>(&self, result: &Result<T, CallError>, ns: u64) {
        if self.off.load(Relaxed) {
            return;
        }
        let (c, w) = self.counts.local_counts();
        w.add(&c.calls, 1);
        c.latency.record_by(ns, w);
        match result {
            Ok(_) => w.add(&c.ok, 1),
            Err(e) => w.add(&c.errors[class_index(e)], 1),
        }
    }

    pub fn retried(&self) {
        self.add(|c| &c.retries);
    }

    pub fn failed_over(&self) {
        self.add(|c| &c.failovers);
    }

    pub fn hedged(&self) {
        self.add(|c| &c.hedges);
    }

    pub fn budget_refused(&self) {
        self.add(|c| &c.budget_refused);
    }

    pub fn fell_back(&self) {
        self.add(|c| &c.fallbacks);
    }

    /// The result cache answered (`true`) or did not.
    pub fn cache(&self, hit: bool) {
        self.add(|c| if hit { &c.cache_hits } else { &c.cache_misses });
    }

    /// The counters now (every thread's share added up).
    pub fn counts(&self) -> CallCounts {
        CallCounts {
            calls: self.counts.sum(|c| &c.calls),
            ok: self.counts.sum(|c| &c.ok),
            errors: CLASSES
                .iter()
                .enumerate()
                .map(|(i, class)| (class.to_string(), self.counts.sum(|c| &c.errors[i])))
                .filter(|(_, n)| *n > 0)
                .collect(),
            retries: self.counts.sum(|c| &c.retries),
            failovers: self.counts.sum(|c| &c.failovers),
            hedges: self.counts.sum(|c| &c.hedges),
            retry_budget_refused: self.counts.sum(|c| &c.budget_refused),
            fallbacks: self.counts.sum(|c| &c.fallbacks),
            cache_hits: self.counts.sum(|c| &c.cache_hits),
            cache_misses: self.counts.sum(|c| &c.cache_misses),
            latency_histogram: Latency::merged(self.counts.each().map(|c| &c.latency)).exported(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_counts_under_the_class_it_names() {
        let errors = [
            CallError::NoSuchService("s".into()),
            CallError::NoEndpoint {
                service: "s".into(),
                reason: "r".into(),
            },
            CallError::BreakerOpen { target: "t".into() },
            CallError::Encode("e".into()),
            CallError::Decode("d".into()),
            CallError::Transport(TransportError::Timeout),
            CallError::Transport(TransportError::Frame("f".into())),
        ]
        .into_iter()
        .chain(ErrorClass::ALL.into_iter().map(|class| CallError::Remote {
            class,
            message: String::new(),
            retry_after_ms: None,
            code: None,
        }));
        for e in errors {
            assert_eq!(CLASSES[class_index(&e)], e.class(), "{e:?}");
        }
    }

    #[test]
    fn counts_calls_outcomes_and_attempts() {
        let c = CallCounters::default();
        c.ended::<()>(&Ok(()), 1_000);
        c.ended::<()>(&Err(CallError::Transport(TransportError::Timeout)), 3_000);
        c.retried();
        c.failed_over();
        c.failed_over();
        c.hedged();
        c.budget_refused();
        let n = c.counts();
        assert_eq!((n.calls, n.ok), (2, 1));
        assert_eq!(n.errors.get("deadline_exceeded"), Some(&1));
        assert_eq!(n.errors.len(), 1);
        assert_eq!((n.retries, n.failovers, n.hedges), (1, 2, 1));
        assert_eq!(n.retry_budget_refused, 1);
        assert_eq!(n.latency_histogram.count, 2);
        assert_eq!(n.latency_histogram.sum_ns, 4_000);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let c = CallCounters::default();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..100 {
                        c.ended::<()>(&Ok(()), 1_000 * (t + 1));
                    }
                    c.ended::<()>(&Err(CallError::Decode("d".into())), 1);
                });
            }
        });
        let n = c.counts();
        assert_eq!((n.calls, n.ok), (404, 400));
        assert_eq!(n.errors.get("bad_response"), Some(&4));
        assert_eq!(n.latency_histogram.count, 404);
        assert_eq!(
            n.latency_histogram.sum_ns,
            100 * (1 + 2 + 3 + 4) * 1_000 + 4
        );
    }

    #[test]
    fn monitor_off_counts_nothing() {
        let c = CallCounters::default();
        c.monitor(false);
        c.ended::<()>(&Ok(()), 1_000);
        c.retried();
        c.failed_over();
        c.hedged();
        c.budget_refused();
        c.fell_back();
        c.cache(true);
        assert_eq!(c.counts(), CallCounts::default());
        c.monitor(true);
        c.cache(true);
        c.cache(false);
        c.ended::<()>(&Ok(()), 1_000);
        let n = c.counts();
        assert_eq!((n.calls, n.cache_hits, n.cache_misses), (1, 1, 1));
    }
}
