//! The one latency histogram of the project: recorded without a lock (an EWMA, one
//! compare-and-swap, and a log-linear histogram, one atomic add), so every request can be
//! measured on a hot path and people still get p50/p99. The provider's per-method stats,
//! `axle demo` and `axle bench` all report through it.
//!
//! The histogram has 16 linear sub-buckets per power of two, and a quantile reads as its
//! bucket's middle: exact to within 1/32 (about 3%) of its value, over the whole `u64`
//! range of nanoseconds, in a fixed 976 counters (≈ 8 KiB each). HDR precision is not
//! needed to tell 1 ms from 5 ms, or two systems apart in a benchmark, and an hdrhistogram
//! would need a lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::ewma::AtomicEwma;
use crate::striped::Writers;

/// Sub-buckets per power of two, as a shift (2^4 = 16).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Values below `SUB` get a bucket each; then `SUB` buckets per power of two up to 2^63.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// Latencies of one thing measured (a method's handler, a load run).
pub struct Latency {
    ewma_ns: AtomicEwma,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

/// The upper bounds (ns) of the buckets a [`Latency`] is exported in (Prometheus
/// `_bucket{le=...}`, `docs/observability.md`): 100 µs to 10 s, 1-2.5-5 per decade. Few
/// and fixed, so every histogram of a scrape has the same `le` labels and a dashboard can
/// sum them; the fine buckets stay inside for the quantiles.
pub const EXPORT_BOUNDS_NS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// A [`Latency`] in the export buckets: how many samples, their sum, and how many were at
/// most each of [`EXPORT_BOUNDS_NS`] (cumulative, as Prometheus wants; the `+Inf` bucket
/// is `count`). A sample counts under the first bound at or above its fine bucket's
/// middle, so within 1/32 of its value.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Exported {
    pub count: u64,
    pub sum_ns: u64,
    /// One count per bound of [`EXPORT_BOUNDS_NS`] (empty: no sample yet).
    pub le: Vec<u64>,
}

/// What [`Latency`] says at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    pub count: u64,
    pub ewma_ns: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            ewma_ns: AtomicEwma::default(),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (exp - SUB_BITS)) as usize & (SUB - 1);
    SUB + (exp - SUB_BITS) as usize * SUB + sub
}

/// The middle of bucket `i`'s range (its value when reporting a quantile).
fn value_of(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = ((i - SUB) / SUB) as u32 + SUB_BITS;
    let sub = ((i - SUB) % SUB) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    let low = (SUB as u64 + sub) << (exp - SUB_BITS);
    low.saturating_add(width / 2)
}

impl Latency {
    /// One request took `ns`.
    pub fn record(&self, ns: u64) {
        self.record_by(ns, Writers::Many);
    }

    /// One request took `ns`, written by `writers`: a thread's own copy of a striped
    /// histogram is written without a locked instruction (`crate::striped`).
    #[inline]
    pub fn record_by(&self, ns: u64, writers: Writers) {
        self.ewma_ns.record_by(ns, writers);
        writers.add(&self.sum_ns, ns);
        // Read first: `fetch_max` is a locked compare-and-swap even when the maximum
        // stands.
        if ns > self.max_ns.load(Relaxed) {
            match writers {
                Writers::One => self.max_ns.store(ns, Relaxed),
                Writers::Many => {
                    self.max_ns.fetch_max(ns, Relaxed);
                }
            }
        }
        writers.add(&self.buckets[bucket_of(ns)], 1);
    }

    /// Adds `other`'s samples to these (per-task histograms merged at the end of a load
    /// run, so the tasks never contend on one set of counters). The EWMA is not merged:
    /// it is an average in arrival order, which two histograms do not share.
    pub fn merge(&self, other: &Latency) {
        for (mine, theirs) in self.buckets.iter().zip(other.buckets.iter()) {
            mine.fetch_add(theirs.load(Relaxed), Relaxed);
        }
        self.sum_ns.fetch_add(other.sum_ns.load(Relaxed), Relaxed);
        self.max_ns.fetch_max(other.max_ns.load(Relaxed), Relaxed);
    }

    /// One histogram of several (a [`Striped`](crate::striped::Striped) latency's
    /// copies, read together). Its EWMA is the mean of theirs that have a sample: each
    /// follows the latest samples of its own threads.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Latency>) -> Latency {
        let all = Latency::default();
        let (mut ewma_sum, mut ewmas) = (0u128, 0u128);
        for part in parts {
            all.merge(part);
            let ewma = part.ewma_ns.get();
            if ewma != 0 {
                ewma_sum += u128::from(ewma);
                ewmas += 1;
            }
        }
        if let Some(mean) = ewma_sum.checked_div(ewmas) {
            all.ewma_ns.set(mean as u64);
        }
        all
    }

    /// The histogram in the export buckets (for `/metrics`; reads every counter once).
    pub fn exported(&self) -> Exported {
        let mut le = vec![0u64; EXPORT_BOUNDS_NS.len()];
        let mut count = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.load(Relaxed);
            if n == 0 {
                continue;
            }
            count += n;
            let value = value_of(i);
            if let Some(first) = EXPORT_BOUNDS_NS.iter().position(|&bound| value <= bound) {
                le[first] += n;
            }
        }
        if count == 0 {
            return Exported::default();
        }
        for i in 1..le.len() {
            le[i] += le[i - 1];
        }
        Exported {
            count,
            sum_ns: self.sum_ns.load(Relaxed),
            le,
        }
    }

    /// A snapshot (counters read one by one: a request recorded meanwhile may show in some
    /// and not others, which people reading a table do not notice).
    pub fn snapshot(&self) -> LatencySnapshot {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return LatencySnapshot::default();
        }
        let quantile = |q: f64| {
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return value_of(i);
                }
            }
            value_of(BUCKETS - 1)
        };
        let max_ns = self.max_ns.load(Relaxed);
        LatencySnapshot {
            count,
            ewma_ns: self.ewma_ns.get(),
            mean_ns: self.sum_ns.load(Relaxed) / count,
            p50_ns: quantile(0.50).min(max_ns),
            p99_ns: quantile(0.99).min(max_ns),
            max_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_count_both() {
        let (a, b) = (Latency::default(), Latency::default());
        for ns in 1..=100 {
            a.record(ns * 1_000);
            b.record(ns * 1_000 + 100_000);
        }
        a.merge(&b);
        let s = a.snapshot();
        assert_eq!(s.count, 200);
        assert_eq!(s.max_ns, 200_000);
        assert!((90_000..=110_000).contains(&s.p50_ns), "{s:?}");
    }

    #[test]
    fn merged_parts_read_as_one_with_the_mean_of_their_ewmas() {
        let (a, b, idle) = (Latency::default(), Latency::default(), Latency::default());
        for _ in 0..50 {
            a.record(10_000);
            b.record(30_000);
        }
        let s = Latency::merged([&a, &b, &idle]).snapshot();
        assert_eq!(s.count, 100);
        assert_eq!(s.mean_ns, 20_000);
        assert_eq!(s.max_ns, 30_000);
        assert_eq!(
            s.ewma_ns, 20_000,
            "a part with no sample does not pull it down"
        );
        assert_eq!(
            Latency::merged([&idle]).snapshot(),
            LatencySnapshot::default()
        );
    }

    #[test]
    fn buckets_cover_u64_in_order_within_a_32nd() {
        let mut last = 0;
        for ns in (0..10_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = bucket_of(ns);
            assert!(i < BUCKETS, "{ns} -> {i}");
            assert!(i >= last || ns > 10_000, "monotonic at {ns}");
            last = i;
            let v = value_of(i);
            let err = v.abs_diff(ns) as f64 / ns.max(1) as f64;
            assert!(err <= 1.0 / 32.0, "{ns} reads as {v}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn exported_buckets_are_cumulative_and_end_at_the_count() {
        let l = Latency::default();
        assert_eq!(l.exported(), Exported::default());
        // 50 µs (under the first bound), 3 ms (under 5 ms), 20 s (only +Inf).
        for ns in [50_000, 50_000, 3_000_000, 20_000_000_000] {
            l.record(ns);
        }
        let e = l.exported();
        assert_eq!(e.count, 4);
        assert_eq!(e.sum_ns, 20_003_100_000);
        assert_eq!(e.le.len(), EXPORT_BOUNDS_NS.len());
        let at = |bound: u64| e.le[EXPORT_BOUNDS_NS.iter().position(|&b| b == bound).unwrap()];
        assert_eq!(at(100_000), 2);
        assert_eq!(at(2_500_000), 2);
        assert_eq!(at(5_000_000), 3);
        assert_eq!(
            at(10_000_000_000),
            3,
            "20 s is above every bound: +Inf only"
        );
        assert!(e.le.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn quantiles_mean_max_and_ewma_of_known_samples() {
        let l = Latency::default();
        assert_eq!(l.snapshot(), LatencySnapshot::default());
        // 1..=100 µs, once each.
        for us in 1..=100u64 {
            l.record(us * 1000);
        }
        let s = l.snapshot();
        assert_eq!(s.count, 100);
        assert_eq!(s.max_ns, 100_000);
        assert_eq!(s.mean_ns, 50_500);
        assert!(s.p50_ns.abs_diff(50_000) <= 50_000 / 8, "{s:?}");
        assert!(s.p99_ns.abs_diff(99_000) <= 99_000 / 8, "{s:?}");
        assert!(s.p99_ns <= s.max_ns);
        // The EWMA follows the latest samples: after many 10 µs it reads 10 µs.
        for _ in 0..200 {
            l.record(10_000);
        }
        let e = l.snapshot().ewma_ns;
        assert!(e.abs_diff(10_000) <= 100, "{e}");
    }
}
