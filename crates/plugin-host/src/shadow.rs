//! What a shadow plugin's decisions came to beside the live plugin's (`docs/shadow.md`):
//! the sampling that bounds its cost, its agreement, divergence and fault counts, and the
//! last few divergent decisions with what the kernel knew of the endpoints then. Shared
//! by the caller's shadows (selector, routers) and the provider's (limiter), and shown by
//! `axle stats`, `/metrics` and the dashboard.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Divergent decisions kept per shadow, newest last: enough to see a pattern on the
/// dashboard, few enough that keeping them costs nothing worth measuring.
pub const RECENT: usize = 16;

/// Decides which calls a shadow runs on: a draw from the thread's own generator against a
/// fixed threshold, so an unsampled call costs one comparison and touches no shared
/// memory (a shared counter would bounce one cache line between every core).
#[derive(Clone, Copy, Debug)]
pub struct Sampler {
    /// Out of 2^32; 2^32 samples every call, 0 none.
    threshold: u64,
}

impl Sampler {
    /// Samples `rate` of calls (clamped to 0..=1; the manifest refuses anything else).
    pub fn new(rate: f64) -> Self {
        let rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        Sampler {
            threshold: (rate * 4_294_967_296.0).round() as u64,
        }
    }

    /// Whether this call is sampled.
    #[inline]
    pub fn hit(&self) -> bool {
        self.threshold != 0 && u64::from(fastrand::u32(..)) < self.threshold
    }

    /// The share of calls sampled.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / 4_294_967_296.0
    }
}

/// The facts of one endpoint when a divergent decision was made.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FactsView {
    pub address: String,
    pub in_flight: u32,
    pub effective_weight: u32,
    pub ewma_latency_ns: u64,
    /// Calls finished and endpoint faults in the facts' outcome window.
    pub window_total: u32,
    pub window_failures: u32,
}

impl FactsView {
    /// `facts` of the endpoint at `address`.
    pub fn of(address: &str, facts: &axle_spi::EndpointFacts) -> Self {
        FactsView {
            address: address.to_string(),
            in_flight: facts.in_flight,
            effective_weight: facts.weight,
            ewma_latency_ns: facts.ewma_latency_ns,
            window_total: facts.window_total,
            window_failures: facts.window_failures,
        }
    }
}

/// One decision where the shadow and the live plugin differed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Divergence {
    /// Milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// What the live plugin decided (an endpoint, a candidate set, admit or reject).
    pub live: String,
    /// What the shadow would have decided instead.
    pub candidate: String,
    /// Selectors: the facts of the endpoint each chose, as the live pick was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_facts: Option<FactsView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_facts: Option<FactsView>,
}

/// One shadow as people see it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShadowView {
    /// `selector`, `routers` or `limiter`.
    pub kind: String,
    /// The service whose slot it shadows (empty for a provider's limiter).
    pub service: String,
    /// The live plugin(s) it decides beside, and the shadow plugin(s) (chains joined
    /// with `,`).
    pub live: String,
    pub candidate: String,
    /// The share of calls sampled.
    pub sample: f64,
    /// Sampled calls: agreed + diverged + faults.
    pub sampled: u64,
    pub agreed: u64,
    pub diverged: u64,
    /// Sampled calls the shadow gave no answer of its own on (trap, timeout, invalid
    /// answer, quarantine, busy): its plugin counters say which.
    pub faults: u64,
    /// The last [`RECENT`] divergences, oldest first.
    pub recent: Vec<Divergence>,
}

/// The counters of one shadow slot: written on sampled calls only.
#[derive(Debug)]
pub struct ShadowCounters {
    kind: &'static str,
    service: String,
    live: String,
    candidate: String,
    sampler: Sampler,
    agreed: AtomicU64,
    diverged: AtomicU64,
    faults: AtomicU64,
    recent: Mutex<VecDeque<Divergence>>,
}

impl ShadowCounters {
    pub fn new(kind: &'static str, service: &str, live: &str, candidate: &str, rate: f64) -> Self {
        ShadowCounters {
            kind,
            service: service.to_string(),
            live: live.to_string(),
            candidate: candidate.to_string(),
            sampler: Sampler::new(rate),
            agreed: AtomicU64::new(0),
            diverged: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
        }
    }

    /// Whether these counters are the same shadow slot (kept across a swap that changes
    /// neither the plugins nor the rate).
    pub fn is(&self, kind: &str, service: &str, live: &str, candidate: &str, rate: f64) -> bool {
        self.kind == kind
            && self.service == service
            && self.live == live
            && self.candidate == candidate
            && self.sampler.threshold == Sampler::new(rate).threshold
    }

    /// Whether this call is sampled.
    #[inline]
    pub fn sample(&self) -> bool {
        self.sampler.hit()
    }

    pub fn agreed(&self) {
        self.agreed.fetch_add(1, Relaxed);
    }

    /// The shadow gave no answer of its own.
    pub fn faulted(&self) {
        self.faults.fetch_add(1, Relaxed);
    }

    /// The shadow decided otherwise; `detail` is made only when the ring is free (a
    /// caller never waits for another to record its divergence).
    pub fn diverged(&self, detail: impl FnOnce() -> Divergence) {
        self.diverged.fetch_add(1, Relaxed);
        if let Ok(mut recent) = self.recent.try_lock() {
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(detail());
        }
    }

    pub fn view(&self) -> ShadowView {
        let (agreed, diverged, faults) = (
            self.agreed.load(Relaxed),
            self.diverged.load(Relaxed),
            self.faults.load(Relaxed),
        );
        ShadowView {
            kind: self.kind.to_string(),
            service: self.service.clone(),
            live: self.live.clone(),
            candidate: self.candidate.clone(),
            sample: self.sampler.rate(),
            sampled: agreed + diverged + faults,
            agreed,
            diverged,
            faults,
            recent: self
                .recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect(),
        }
    }
}

/// Now, in milliseconds since the Unix epoch (for [`Divergence::at_unix_ms`]).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_takes_its_share() {
        assert!(!(0..10_000).any(|_| Sampler::new(0.0).hit()));
        assert!((0..10_000).all(|_| Sampler::new(1.0).hit()));
        let tenth = Sampler::new(0.1);
        let hits = (0..100_000).filter(|_| tenth.hit()).count();
        // 10,000 expected; the standard deviation is about 95.
        assert!((9_500..=10_500).contains(&hits), "{hits}");
        assert_eq!(Sampler::new(f64::NAN).rate(), 0.0);
        assert_eq!(Sampler::new(7.0).rate(), 1.0);
    }

    #[test]
    fn the_counters_add_up_and_keep_the_last_divergences() {
        let c = ShadowCounters::new("selector", "echo", "rr", "random", 1.0);
        c.agreed();
        c.faulted();
        for i in 0..(RECENT + 4) {
            c.diverged(|| Divergence {
                live: format!("a{i}"),
                candidate: "b".into(),
                ..Divergence::default()
            });
        }
        let v = c.view();
        assert_eq!((v.sampled, v.agreed, v.diverged, v.faults), (22, 1, 20, 1));
        assert_eq!(v.recent.len(), RECENT);
        assert_eq!(v.recent[0].live, "a4", "the oldest were dropped");
        assert_eq!(v.recent[RECENT - 1].live, format!("a{}", RECENT + 3));
        assert!(c.is("selector", "echo", "rr", "random", 1.0));
        assert!(!c.is("selector", "echo", "rr", "random", 0.5));
    }
}
