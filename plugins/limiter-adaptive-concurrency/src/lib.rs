//! `adaptive-concurrency`: a limit on requests in flight per key that follows measured
//! latency, in the manner of Netflix's concurrency-limits `Gradient2`. The limiter admits
//! while fewer than `limit` requests of the key are in flight; the kernel tells it how
//! each admitted request ended (`release`, the `concurrency-limiter` world), and each
//! sample moves the limit:
//!
//! ```text
//! gradient = clamp(tolerance × long-rtt / short-rtt, 0.5, 1)
//! new      = limit × gradient + queue-size
//! limit    = limit × (1 − smoothing) + new × smoothing,   bounded [min-limit, max-limit]
//! ```
//!
//! `long-rtt` is a slow average of latency (what the service does when it is not queued),
//! `short-rtt` the latest sample. While latency stays near the long average the limit
//! grows by about `queue-size × smoothing` per sample; when requests start to queue and
//! latency climbs, the gradient falls below 1 and the limit shrinks. A dropped request
//! (timeout, overload, internal error, caller gone) cuts the limit by `backoff`. A key
//! using under half its limit is not the bottleneck, so its limit does not grow.
//!
//! Config: `initial-limit` [20], `min-limit` [1], `max-limit` [1000], `smoothing` [0.2],
//! `tolerance` [1.5], `queue-size` [4], `long-window` [600] samples, `backoff` [0.9].

use axle_sdk::{Admission, Config, KeyEntry, LimitKey, Limiter};

mod gradient;
pub use gradient::{Gradient, Settings};

/// The adaptive-concurrency limiter.
pub struct AdaptiveConcurrency {
    settings: Settings,
}

impl AdaptiveConcurrency {
    /// The settings every key follows.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

impl Limiter for AdaptiveConcurrency {
    type KeyState = Gradient;

    fn new(config: &Config) -> Result<Self, String> {
        Ok(AdaptiveConcurrency {
            settings: Settings::from_config(config)?,
        })
    }

    fn prepare(&mut self, _attributes: &LimitKey) -> Gradient {
        Gradient::new(&self.settings)
    }

    fn acquire(&mut self, key: &mut KeyEntry<Gradient>, permits: u32, _now_ns: u64) -> Admission {
        match key.state.acquire(permits.max(1)) {
            Ok(()) => Admission::Admit,
            Err(retry_after_ms) => Admission::Reject { retry_after_ms },
        }
    }

    fn release(
        &mut self,
        key: &mut KeyEntry<Gradient>,
        permits: u32,
        latency_ns: u64,
        dropped: bool,
    ) {
        key.state
            .release(&self.settings, permits.max(1), latency_ns, dropped)
    }

    /// Hot-swap handoff: the learned limit and latency averages (not the requests in
    /// flight: those end on the version that admitted them).
    fn save(&self, g: &Gradient) -> Option<Vec<u8>> {
        Some(g.save())
    }

    fn restore(&mut self, _attributes: &LimitKey, saved: &[u8]) -> Option<Gradient> {
        Gradient::restore(&self.settings, saved)
    }
}

axle_sdk::export_limiter!(AdaptiveConcurrency);

#[cfg(test)]
mod tests;
