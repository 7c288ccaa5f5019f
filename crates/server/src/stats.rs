//! What a provider counts per service/method (the seed's `ServerHandleInfo`): requests,
//! handler runs, answers by error class and handler latency, updated with atomics on the
//! request path (kept per thread, `axle_core::striped`), read as a [`ServerView`] by
//! people (`axle stats`, the admin endpoint). In-flight and the most seen at once come
//! from the method's concurrency guard, which already counts them.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use serde::{Deserialize, Serialize};

use axle_core::latency::{Exported, Latency};
use axle_core::striped::{Striped, Writers};
use axle_wire::ErrorClass;

/// One method's counters.
#[derive(Default)]
pub struct MethodStats {
    /// `monitor = false`: nothing is counted (fixed when the server is built).
    off: bool,
    /// Kept per thread: every request of the method writes them, from every core
    /// (`axle_core::striped`).
    counts: Striped<Counts>,
}

/// One thread's share of a method's counts.
#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    handled: AtomicU64,
    ok: AtomicU64,
    /// By error class, indexed by wire code − 1.
    errors: [AtomicU64; ErrorClass::ALL.len()],
    latency: Latency,
    limiter_admitted: AtomicU64,
    limiter_rejected: AtomicU64,
}

impl MethodStats {
    /// Counters that count (`monitor`) or stay at zero.
    pub fn new(monitor: bool) -> Self {
        MethodStats {
            off: !monitor,
            ..MethodStats::default()
        }
    }

    /// This thread's counts and who writes them, unless monitoring is off.
    fn local(&self) -> Option<(&Counts, Writers)> {
        (!self.off).then(|| self.counts.local_counts())
    }

    /// A request for this method arrived (before any refusal).
    pub fn received(&self) {
        if let Some((c, w)) = self.local() {
            w.add(&c.requests, 1);
        }
    }

    /// The handler ran (to its end or to the deadline) for `ns`.
    pub fn handled(&self, ns: u64) {
        if let Some((c, w)) = self.local() {
            w.add(&c.handled, 1);
            c.latency.record_by(ns, w);
        }
    }

    /// The limiter admitted the request (`true`) or rejected it (only counted when there
    /// is a limiter).
    pub fn limited(&self, admitted: bool) {
        if let Some((c, w)) = self.local() {
            let counter = if admitted {
                &c.limiter_admitted
            } else {
                &c.limiter_rejected
            };
            w.add(counter, 1);
        }
    }

    /// The request was answered: success, or the error class of the answer.
    pub fn answered(&self, error: Option<ErrorClass>) {
        if let Some((c, w)) = self.local() {
            match error {
                None => w.add(&c.ok, 1),
                Some(class) => w.add(&c.errors[class as usize - 1], 1),
            }
        }
    }

    /// A snapshot (every thread's share added up), with the guard's in-flight and
    /// most-at-once counts.
    pub fn view(&self, service: &str, method: &str, in_flight: u32, max_seen: u32) -> MethodView {
        let errors: BTreeMap<String, u64> = ErrorClass::ALL
            .iter()
            .enumerate()
            .map(|(i, class)| {
                (
                    class.as_str().to_string(),
                    self.counts.sum(|c| &c.errors[i]),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let latency = Latency::merged(self.counts.each().map(|c| &c.latency));
        let l = latency.snapshot();
        MethodView {
            service: service.to_string(),
            method: method.to_string(),
            requests: self.counts.sum(|c| &c.requests),
            handled: self.counts.sum(|c| &c.handled),
            ok: self.counts.sum(|c| &c.ok),
            errors,
            in_flight,
            max_concurrency_seen: max_seen,
            ewma_latency_ns: l.ewma_ns,
            mean_latency_ns: l.mean_ns,
            p50_ns: l.p50_ns,
            p99_ns: l.p99_ns,
            max_latency_ns: l.max_ns,
            latency_histogram: latency.exported(),
            limiter_admitted: self.counts.sum(|c| &c.limiter_admitted),
            limiter_rejected: self.counts.sum(|c| &c.limiter_rejected),
            repeats_answered: 0,
        }
    }
}

/// One method as its provider saw it, for people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodView {
    pub service: String,
    pub method: String,
    /// Requests that named this method, refused ones included (a request whose caller
    /// went away before the answer counts here and nowhere else).
    pub requests: u64,
    /// Requests whose handler ran (refusals, unknown methods and requests already past
    /// their deadline never reach it).
    pub handled: u64,
    /// Answered with success.
    pub ok: u64,
    /// Answered with an error, by class (`internal`, `overloaded`, ...; absent: none).
    pub errors: BTreeMap<String, u64>,
    /// Handlers running now.
    pub in_flight: u32,
    /// Most handlers of this method running at once since the start.
    pub max_concurrency_seen: u32,
    /// Handler latency (ns): EWMA of the latest, mean, p50, p99 (within 12.5%) and max
    /// since the start. 0 before the first run.
    pub ewma_latency_ns: u64,
    pub mean_latency_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_latency_ns: u64,
    /// Handler latency in the export buckets (`/metrics` draws its histogram from it).
    #[serde(default)]
    pub latency_histogram: Exported,
    /// Requests the limiter plugin admitted and rejected (0 without a limiter).
    #[serde(default)]
    pub limiter_admitted: u64,
    #[serde(default)]
    pub limiter_rejected: u64,
    /// Repeated requests (same request id) answered from the deduplication table
    /// without running the handler again (`dedup-ttl-ms`; 0 without it).
    #[serde(default)]
    pub repeats_answered: u64,
}

impl MethodView {
    /// Errors of every class.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// A server's view of its methods, for people.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    pub address: String,
    /// Requests being handled now (all methods).
    pub in_flight: u64,
    /// Requests refused before a method was known: while shutting down, or naming none.
    pub refused_closing: u64,
    pub malformed: u64,
    /// Connections open now; refused at the cap (every one busy); idle ones closed to
    /// make room for new ones.
    #[serde(default)]
    pub connections: u64,
    #[serde(default)]
    pub connections_refused: u64,
    #[serde(default)]
    pub connections_evicted: u64,
    /// By service, then method.
    pub methods: Vec<MethodView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_answers_by_class_and_runs() {
        let s = MethodStats::default();
        for _ in 0..5 {
            s.received();
        }
        s.handled(1_000);
        s.answered(None);
        s.handled(3_000);
        s.answered(Some(ErrorClass::Internal));
        s.handled(2_000);
        s.answered(Some(ErrorClass::Internal));
        s.answered(Some(ErrorClass::Overloaded));
        let v = s.view("flaky", "echo", 1, 4);
        assert_eq!((v.requests, v.handled, v.ok), (5, 3, 1));
        assert_eq!(v.errors.get("internal"), Some(&2));
        assert_eq!(v.errors.get("overloaded"), Some(&1));
        assert_eq!(v.errors.len(), 2, "classes never seen are left out");
        assert_eq!(v.error_count(), 3);
        assert_eq!((v.in_flight, v.max_concurrency_seen), (1, 4));
        assert_eq!(v.max_latency_ns, 3_000);
        assert_eq!(v.mean_latency_ns, 2_000);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let s = MethodStats::default();
        std::thread::scope(|scope| {
            for t in 1..=4u64 {
                let s = &s;
                scope.spawn(move || {
                    for _ in 0..50 {
                        s.received();
                        s.handled(t * 1_000);
                        s.answered(None);
                    }
                    s.answered(Some(ErrorClass::Internal));
                });
            }
        });
        let v = s.view("s", "m", 0, 0);
        assert_eq!((v.requests, v.handled, v.ok), (200, 200, 200));
        assert_eq!(v.errors.get("internal"), Some(&4));
        assert_eq!(v.latency_histogram.count, 200);
        assert_eq!(v.mean_latency_ns, 2_500);
        assert_eq!(v.max_latency_ns, 4_000);
        assert!((1_000..=4_000).contains(&v.ewma_latency_ns), "{v:?}");
    }

    #[test]
    fn every_class_has_its_own_counter() {
        let s = MethodStats::default();
        for (i, class) in ErrorClass::ALL.into_iter().enumerate() {
            for _ in 0..=i {
                s.answered(Some(class));
            }
        }
        let v = s.view("s", "m", 0, 0);
        for (i, class) in ErrorClass::ALL.into_iter().enumerate() {
            assert_eq!(v.errors[class.as_str()], i as u64 + 1, "{class}");
        }
    }

    #[test]
    fn monitor_off_counts_nothing() {
        let s = MethodStats::new(false);
        s.received();
        s.limited(true);
        s.handled(42);
        s.answered(Some(ErrorClass::Business));
        s.answered(None);
        let v = s.view("kv", "get", 0, 0);
        assert_eq!((v.requests, v.handled, v.ok, v.error_count()), (0, 0, 0, 0));
        let on = MethodStats::new(true);
        on.received();
        assert_eq!(on.view("kv", "get", 0, 0).requests, 1);
    }

    #[test]
    fn a_view_round_trips_through_json() {
        let s = MethodStats::default();
        s.received();
        s.handled(42);
        s.answered(Some(ErrorClass::Business));
        let v = s.view("kv", "get", 0, 1);
        let json = serde_json::to_string(&v).unwrap();
        let back: MethodView = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
    }
}
