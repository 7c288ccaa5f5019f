//! `flaky`: answers its input like `echo`, after a latency drawn per request, and fails or
//! hangs at configured rates. One instance's behaviour is set by `axle serve` flags or the
//! manifest's `[serve.flaky]` table.

use std::sync::Arc;
use std::time::Duration;

use axle_server::{Response, ServerBuilder, Status};

pub use axle_manifest::FlakyConfig;

/// A request's latency under `config`: base, jitter, and the slow tail at its rate.
fn latency(config: &FlakyConfig) -> Duration {
    let mut ms = config.latency_ms + fastrand::f64() * config.jitter_ms;
    if fastrand::f64() < config.slow_rate {
        ms += config.slow_ms;
    }
    Duration::from_secs_f64(ms / 1000.0)
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
                let latency = latency(&config);
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
