//! The services `axle serve` hosts: `echo` (returns its input), `flaky` (latency and
//! failures on demand, for governance demos and tests), `kv` (in-memory get/put; `put` is
//! the non-idempotent method).

pub mod echo;
pub mod flaky;
pub mod kv;

use axle_server::ServerBuilder;

/// Registers all three.
pub fn register(builder: ServerBuilder, flaky: flaky::FlakyConfig) -> ServerBuilder {
    let builder = echo::register(builder);
    let builder = flaky::register(builder, flaky);
    kv::register(builder)
}
