//! `[serve]`: how `axle serve` runs by default, and the demo `flaky` service's behaviour
//! (its settings are manifest data; the service itself lives with the other demo
//! services in the `axle` crate).

use std::time::Duration;

use axle_transport::serve::ServeLimits;
use serde::Deserialize;

/// `[serve]`.
#[derive(Clone, Debug, Default)]
pub struct ServeSpec {
    /// Where to listen (`--listen` overrides; default [`crate::defaults::LISTEN`]).
    pub listen: Option<String>,
    /// The `flaky` service's behaviour (`--flaky-*` flags override field by field).
    pub flaky: FlakyConfig,
    /// Connection limits (`max-connections`, `idle-timeout-ms`, `frame-timeout-ms`,
    /// `max-requests-per-connection`, `max-buffered-bytes`).
    pub limits: ServeLimits,
}

/// Checks each limit's range; the error names the key.
pub(crate) fn limits(raw: &crate::raw::RawServe) -> Result<ServeLimits, crate::KeyError> {
    let d = ServeLimits::default();
    let within = |key: &str, v: Option<u64>, lo: u64, hi: u64, default: u64| match v {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        Some(v) => Err((
            format!("serve.{key}"),
            format!("must be between {lo} and {hi} (got {v})"),
        )),
    };
    let ms = |key, v, lo, hi, default: Duration| {
        within(key, v, lo, hi, default.as_millis() as u64).map(Duration::from_millis)
    };
    Ok(ServeLimits {
        frame: d.frame,
        max_connections: within(
            "max-connections",
            raw.max_connections,
            1,
            1_000_000,
            d.max_connections as u64,
        )? as usize,
        idle_timeout: ms(
            "idle-timeout-ms",
            raw.idle_timeout_ms,
            100,
            86_400_000,
            d.idle_timeout,
        )?,
        frame_timeout: ms(
            "frame-timeout-ms",
            raw.frame_timeout_ms,
            10,
            3_600_000,
            d.frame_timeout,
        )?,
        max_requests: within(
            "max-requests-per-connection",
            raw.max_requests_per_connection,
            1,
            1_000_000,
            d.max_requests as u64,
        )? as usize,
        max_buffered_bytes: within(
            "max-buffered-bytes",
            raw.max_buffered_bytes,
            1024,
            1 << 40,
            d.max_buffered_bytes as u64,
        )? as usize,
    })
}

/// How a `flaky` instance misbehaves. Rates are probabilities in 0..=1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct FlakyConfig {
    /// Base latency of every request (ms).
    pub latency_ms: f64,
    /// Uniform extra latency, 0..jitter (ms).
    pub jitter_ms: f64,
    /// Share of requests that take `slow_ms` more (a slow tail).
    pub slow_rate: f64,
    /// The tail's extra latency (ms).
    pub slow_ms: f64,
    /// Share of requests that fail with `internal`.
    pub fail_rate: f64,
    /// Share of requests that never answer (they hang until the caller's deadline).
    pub timeout_rate: f64,
}

impl FlakyConfig {
    /// Checks the rates and latencies; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("slow-rate", self.slow_rate),
            ("fail-rate", self.fail_rate),
            ("timeout-rate", self.timeout_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{name} must be between 0 and 1 (got {rate})"));
            }
        }
        for (name, ms) in [
            ("latency-ms", self.latency_ms),
            ("jitter-ms", self.jitter_ms),
            ("slow-ms", self.slow_ms),
        ] {
            if !(0.0..=600_000.0).contains(&ms) {
                return Err(format!("{name} must be between 0 and 600000 (got {ms})"));
            }
        }
        Ok(())
    }
}
