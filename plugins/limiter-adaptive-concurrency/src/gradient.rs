//! One key's gradient limit: requests in flight, the limit, the two latency averages.

use axle_sdk::Config;

/// Samples averaged plainly before the long average turns exponential: the first few
/// samples set the baseline instead of the initial guess.
const WARM_UP_SAMPLES: u64 = 10;

/// What every key follows (the plugin's config).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub initial_limit: f64,
    pub min_limit: f64,
    pub max_limit: f64,
    pub smoothing: f64,
    pub tolerance: f64,
    pub queue_size: f64,
    pub long_window: f64,
    pub backoff: f64,
}

impl Settings {
    /// Reads and checks the config; an error names the key.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[
            "initial-limit",
            "min-limit",
            "max-limit",
            "smoothing",
            "tolerance",
            "queue-size",
            "long-window",
            "backoff",
        ])?;
        let s = Settings {
            initial_limit: config.u64_or("initial-limit", 20)? as f64,
            min_limit: config.u64_or("min-limit", 1)? as f64,
            max_limit: config.u64_or("max-limit", 1000)? as f64,
            smoothing: config.f64_or("smoothing", 0.2)?,
            tolerance: config.f64_or("tolerance", 1.5)?,
            queue_size: config.f64_or("queue-size", 4.0)?,
            long_window: config.u64_or("long-window", 600)? as f64,
            backoff: config.f64_or("backoff", 0.9)?,
        };
        if s.min_limit < 1.0 {
            return Err("key `min-limit`: must be at least 1".into());
        }
        if s.max_limit < s.min_limit || s.max_limit > f64::from(u32::MAX) {
            return Err(format!(
                "key `max-limit`: must be from min-limit ({}) to {}",
                s.min_limit,
                u32::MAX
            ));
        }
        if !(s.min_limit..=s.max_limit).contains(&s.initial_limit) {
            return Err(format!(
                "key `initial-limit`: must be from min-limit ({}) to max-limit ({})",
                s.min_limit, s.max_limit
            ));
        }
        if !(s.smoothing > 0.0 && s.smoothing <= 1.0) {
            return Err("key `smoothing`: must be above 0 and at most 1".into());
        }
        if s.tolerance < 1.0 {
            return Err(
                "key `tolerance`: must be at least 1 (1 = no latency growth tolerated)".into(),
            );
        }
        if s.queue_size < 0.0 {
            return Err("key `queue-size`: must not be negative".into());
        }
        if s.long_window < 1.0 {
            return Err("key `long-window`: must be at least 1 sample".into());
        }
        if !(s.backoff > 0.0 && s.backoff <= 1.0) {
            return Err("key `backoff`: must be above 0 and at most 1".into());
        }
        Ok(s)
    }
}

/// One key's state.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient {
    limit: f64,
    in_flight: u32,
    /// Slow average of latency (ns): the service's latency when not queued.
    long_rtt: f64,
    /// The latest sample (ns).
    short_rtt: f64,
    samples: u64,
}

impl Gradient {
    /// A key at the initial limit, nothing measured.
    pub fn new(s: &Settings) -> Self {
        Gradient {
            limit: s.initial_limit,
            in_flight: 0,
            long_rtt: 0.0,
            short_rtt: 0.0,
            samples: 0,
        }
    }

    /// The limit now, as a whole number of requests.
    pub fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// Requests admitted and not yet released.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Admits `permits` if they fit under the limit; otherwise the milliseconds after
    /// which one request of the key has probably ended (the latest latency, at least 1).
    pub fn acquire(&mut self, permits: u32) -> Result<(), u32> {
        if u64::from(self.in_flight) + u64::from(permits) <= u64::from(self.limit()) {
            self.in_flight += permits;
            return Ok(());
        }
        Err((self.short_rtt / 1e6)
            .ceil()
            .clamp(1.0, f64::from(u32::MAX)) as u32)
    }

    /// One admitted request ended.
    pub fn release(&mut self, s: &Settings, permits: u32, latency_ns: u64, dropped: bool) {
        // Whether the key was using its limit while this request ran: the in-flight
        // count it ended in, itself included.
        let busy = f64::from(self.in_flight) >= self.limit / 2.0;
        self.in_flight = self.in_flight.saturating_sub(permits);
        if dropped {
            self.limit = (self.limit * s.backoff).clamp(s.min_limit, s.max_limit);
            return;
        }
        let rtt = (latency_ns as f64).max(1.0);
        self.samples += 1;
        self.short_rtt = rtt;
        self.long_rtt = if self.samples <= WARM_UP_SAMPLES {
            self.long_rtt + (rtt - self.long_rtt) / self.samples as f64
        } else {
            let alpha = 2.0 / (s.long_window + 1.0);
            self.long_rtt + (rtt - self.long_rtt) * alpha
        };
        // After a long spell of high latency the long average lags far above what the
        // service does now: let it catch up faster, so the limit can grow again.
        if self.long_rtt / self.short_rtt > 2.0 {
            self.long_rtt *= 0.95;
        }
        if !busy {
            return;
        }
        let gradient = (s.tolerance * self.long_rtt / self.short_rtt).clamp(0.5, 1.0);
        let new = self.limit * gradient + s.queue_size;
        self.limit =
            (self.limit * (1.0 - s.smoothing) + new * s.smoothing).clamp(s.min_limit, s.max_limit);
    }

    /// The hand-off bytes: the limit and the long average.
    pub fn save(&self) -> Vec<u8> {
        let mut out = self.limit.to_le_bytes().to_vec();
        out.extend_from_slice(&self.long_rtt.to_le_bytes());
        out.extend_from_slice(&self.samples.to_le_bytes());
        out
    }

    /// A key from what [`Gradient::save`] wrote, bounded by the new settings; `None` for
    /// bytes it did not write.
    pub fn restore(s: &Settings, saved: &[u8]) -> Option<Self> {
        let limit = f64::from_le_bytes(saved.get(..8)?.try_into().ok()?);
        let long_rtt = f64::from_le_bytes(saved.get(8..16)?.try_into().ok()?);
        let samples = u64::from_le_bytes(saved.get(16..24)?.try_into().ok()?);
        if !(limit.is_finite() && long_rtt.is_finite() && long_rtt >= 0.0) {
            return None;
        }
        Some(Gradient {
            limit: limit.clamp(s.min_limit, s.max_limit),
            in_flight: 0,
            long_rtt,
            short_rtt: long_rtt,
            samples,
        })
    }
}
