//! What a method's calls came to, counted where each fact is born: the call's end (its
//! outcome by class and its latency, in `pipeline.rs`), each retry, failover and hedge
//! sent, each one the retry budget refused. One set per method policy (a declared
//! method's own, `*` for every other name: bounded, never created by a call), kept across
//! swaps; relaxed atomics and the project's one histogram, so counting costs a few adds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use axle_core::latency::{Exported, Latency};
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
        CallError::Remote { class, .. } => wire(*class),
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
    calls: AtomicU64,
    ok: AtomicU64,
    errors: [AtomicU64; CLASSES.len()],
    retries: AtomicU64,
    failovers: AtomicU64,
    hedges: AtomicU64,
    budget_refused: AtomicU64,
    fallbacks: AtomicU64,
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
    /// Call latency, all attempts included.
    pub latency_histogram: Exported,
}

impl CallCounters {
    /// A call ended (before its fallback) after `ns`.
    pub fn ended<T>(&self, result: &Result<T, CallError>, ns: u64) {
        self.calls.fetch_add(1, Relaxed);
        self.latency.record(ns);
        match result {
            Ok(_) => self.ok.fetch_add(1, Relaxed),
            Err(e) => self.errors[class_index(e)].fetch_add(1, Relaxed),
        };
    }

    pub fn retried(&self) {
        self.retries.fetch_add(1, Relaxed);
    }

    pub fn failed_over(&self) {
        self.failovers.fetch_add(1, Relaxed);
    }

    pub fn hedged(&self) {
        self.hedges.fetch_add(1, Relaxed);
    }

    pub fn budget_refused(&self) {
        self.budget_refused.fetch_add(1, Relaxed);
    }

    pub fn fell_back(&self) {
        self.fallbacks.fetch_add(1, Relaxed);
    }

    /// The counters now.
    pub fn counts(&self) -> CallCounts {
        CallCounts {
            calls: self.calls.load(Relaxed),
            ok: self.ok.load(Relaxed),
            errors: CLASSES
                .iter()
                .zip(&self.errors)
                .map(|(class, n)| (class.to_string(), n.load(Relaxed)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            retries: self.retries.load(Relaxed),
            failovers: self.failovers.load(Relaxed),
            hedges: self.hedges.load(Relaxed),
            retry_budget_refused: self.budget_refused.load(Relaxed),
            fallbacks: self.fallbacks.load(Relaxed),
            latency_histogram: self.latency.exported(),
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
}
