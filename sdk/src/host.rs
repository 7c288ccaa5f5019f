//! What the kernel offers a plugin: time, randomness, per-endpoint facts, logging.
//!
//! In a component these call the `axle:spi/host` imports; natively (tests, benches) they
//! read the thread-local fake host that [`crate::testing`] controls.

use axle_spi::{EndpointFacts, EndpointId, LogLevel};

/// Monotonic nanoseconds since the kernel started.
pub fn now_ns() -> u64 {
    imp::now_ns()
}

/// A random number from the kernel (not for cryptography).
pub fn random() -> u64 {
    imp::random()
}

/// The kernel's current facts about an endpoint.
pub fn facts(id: EndpointId) -> Option<EndpointFacts> {
    imp::facts(id)
}

/// Requests in flight to an endpoint (0 if unknown): cheaper than [`facts`] when that
/// is all a strategy needs.
pub fn in_flight(id: EndpointId) -> u32 {
    imp::in_flight(id)
}

/// Writes a line to the kernel's log.
pub fn log(level: LogLevel, message: &str) {
    imp::log(level, message)
}

#[cfg(not(target_arch = "wasm32"))]
use crate::testing::fake_host as imp;

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::wasm::base::axle::spi::{host, types as wit};
    use axle_spi::{EndpointFacts, EndpointId, LogLevel};

    pub fn now_ns() -> u64 {
        host::now_ns()
    }

    pub fn random() -> u64 {
        host::random()
    }

    pub fn facts(id: EndpointId) -> Option<EndpointFacts> {
        host::facts(id).map(|f| EndpointFacts {
            in_flight: f.in_flight,
            ewma_latency_ns: f.ewma_latency_ns,
            weight: f.weight,
            window_total: f.window_total,
            window_failures: f.window_failures,
            age_ns: f.age_ns,
        })
    }

    pub fn in_flight(id: EndpointId) -> u32 {
        host::in_flight(id)
    }

    pub fn log(level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Trace => wit::LogLevel::Trace,
            LogLevel::Debug => wit::LogLevel::Debug,
            LogLevel::Info => wit::LogLevel::Info,
            LogLevel::Warn => wit::LogLevel::Warn,
            LogLevel::Error => wit::LogLevel::Error,
        };
        host::log(level, message)
    }
}
