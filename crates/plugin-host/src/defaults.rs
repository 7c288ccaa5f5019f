//! The plugin host's defaults and bounds (the manifest's `defaults` index re-exports
//! them, so every default can be read in one place).

use crate::PluginKind;

/// How long one plugin call may run before it is interrupted (epoch deadline), in ms.
/// Generous next to a plugin's real cost (sub-microsecond for the shipped ones) and short
/// next to an RPC deadline, so a looping plugin costs a call milliseconds, not its budget.
/// It is wall time: a thread descheduled mid-call on a busy machine counts too, so it is
/// not set tighter.
pub const CALL_TIMEOUT_MS: u64 = 20;

/// How long instantiating a plugin and running its `init` may take, in ms. Separate from
/// the call deadline: start-up runs the guest's initialisers (an interpreter's, for
/// Python or JS) and happens off the request path.
pub const INIT_TIMEOUT_MS: u64 = 5_000;

/// Linear memory one plugin instance may grow to, in MiB. Rust and C plugins use well
/// under 1 MiB; interpreted guests (Python, JS) need their runtime's heap on top.
pub const MEMORY_MIB: u64 = 64;

/// Longest allowed `timeout-ms` (a call that needs more is not a per-request strategy).
pub const MAX_CALL_TIMEOUT_MS: u64 = 10_000;

/// Largest allowed `memory-mib`.
pub const MAX_MEMORY_MIB: u64 = 4096;

/// Most instances one plugin may run.
pub const MAX_INSTANCES: u32 = 256;

/// How many instances of a plugin the kernel runs when the manifest does not say.
///
/// Stateful kinds get exactly one: their state (a round-robin cursor, a token bucket, a
/// health verdict) must be one per kernel, not one per worker thread. Serializers are
/// stateless, so they get one per core and never wait for each other.
pub fn instances(kind: PluginKind) -> u32 {
    match kind {
        PluginKind::Serializer => std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(2),
        _ => 1,
    }
}

/// What a limiter's call gets when the plugin fails (trap, timeout): admit (fail-open).
/// A broken limiter should not turn into an outage; set `on-error = "reject"` where
/// overload is worse than a missing limit.
pub const LIMITER_ON_ERROR_ADMITS: bool = true;

/// Where compiled components are cached: `$AXLE_CACHE_DIR`, else the user's cache
/// directory (`~/.cache/axle` on Linux). `None` when neither exists: the kernel then
/// compiles every time rather than use a directory others share (a cached artifact is
/// native code it will run).
pub fn cache_dir() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os("AXLE_CACHE_DIR") {
        return Some(dir.into());
    }
    dirs::cache_dir().map(|d| d.join("axle"))
}

/// What an interceptor's call gets when the plugin fails (trap, timeout, an invalid
/// answer): pass (fail-open), like a limiter's default; `on-error = "refuse"` makes it
/// refuse with class `internal` where an unchecked call is worse than a failed one.
pub const INTERCEPTOR_ON_ERROR_PASSES: bool = true;
