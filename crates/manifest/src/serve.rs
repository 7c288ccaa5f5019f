//! `[serve]`: how `axle serve` runs by default, and the demo `flaky` service's behaviour
//! (its settings are manifest data; the service itself lives with the other demo
//! services in the `axle` crate).

use serde::Deserialize;

/// `[serve]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeSpec {
    /// Where to listen (`--listen` overrides; default [`crate::defaults::LISTEN`]).
    pub listen: Option<String>,
    /// The `flaky` service's behaviour (`--flaky-*` flags override field by field).
    pub flaky: FlakyConfig,
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
