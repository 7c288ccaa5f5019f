//! `flaky`: answers its input like `echo`, after a latency drawn per request, and fails or
//! hangs at configured rates. One instance's behaviour is set by `axle serve` flags or the
//! manifest's `[serve.flaky]` table.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::server::{Response, ServerBuilder, Status};

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

    fn latency(&self) -> Duration {
        let mut ms = self.latency_ms + fastrand::f64() * self.jitter_ms;
        if fastrand::f64() < self.slow_rate {
            ms += self.slow_ms;
        }
        Duration::from_secs_f64(ms / 1000.0)
    }
}

/// How long a "timed out" request hangs when the caller gave no deadline.
const HANG: Duration = Duration::from_secs(3600);

pub fn register(builder: ServerBuilder, config: FlakyConfig) -> ServerBuilder {
    let config = Arc::new(config);
    builder.any_method(
        "flaky",
        Arc::new(move |req| {
            let config = config.clone();
            Box::pin(async move {
                let roll = fastrand::f64();
                if roll < config.timeout_rate {
                    tokio::time::sleep(HANG).await;
                }
                let latency = config.latency();
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                if fastrand::f64() < config.fail_rate {
                    return Err(Status::internal("flaky: failing on purpose"));
                }
                Ok(Response {
                    payload: req.payload,
                    content_type: req.content_type,
                })
            })
        }),
    )
}
