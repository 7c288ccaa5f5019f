//! Every default of the manifest, in one place (governance keys: `governance/config.rs`).
//! `docs/manifest.md` and `plugins.toml` quote these; change them here and only here.

use super::PluginKind;

/// The embedded default manifest: the repository's `plugins.toml`, so the `axle` binary
/// runs with no file beside it.
pub const EMBEDDED_MANIFEST: &str = include_str!("../../../plugins.toml");

/// The name used for the embedded manifest in messages.
pub const EMBEDDED_MANIFEST_NAME: &str = "<embedded plugins.toml>";

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

/// Where compiled components are cached when `AXLE_CACHE_DIR` is not set: the user's cache
/// directory (`~/.cache/axle` on Linux), else the system temp dir.
pub fn cache_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("AXLE_CACHE_DIR") {
        return dir.into();
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("axle")
}

/// Ping a connection that has been silent this long.
pub const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// A connection that answers nothing this long after a ping is dead.
pub const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// First wait before re-dialling an endpoint that refused a connection; doubles per
/// failure up to [`RECONNECT_BACKOFF_MAX`].
pub const RECONNECT_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(50);

/// Longest wait between dials of an unreachable endpoint.
pub const RECONNECT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Time allowed to establish a TCP connection.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// A call's whole budget when neither the call nor the manifest says (Dubbo's default).
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_millis(1000);

/// Frames queued for a connection's writer before callers wait.
pub const WRITE_QUEUE: usize = 1024;

/// An endpoint's weight when discovery does not say (Dubbo's default).
pub const ENDPOINT_WEIGHT: u32 = 100;

/// Where `axle serve` listens when `--listen` is not given.
pub const LISTEN: &str = "127.0.0.1:7300";

/// Where providers are found when neither `--registry` nor `[discovery] registry` says:
/// the manifest's own endpoint lists (needs nothing installed).
pub const REGISTRY: &str = "static";

/// The discovery namespace (environment): namespaces are separate key spaces.
pub const NAMESPACE: &str = "default";

/// The discovery group of a provider, and the primary group of a consumer.
pub const GROUP: &str = "default";

/// Lease time-to-live of a registration, in seconds: a provider killed with no chance to
/// deregister disappears from consumers within this (keepalives go every third of it).
pub const LEASE_TTL_S: u64 = 10;

/// How often a consumer re-lists its providers even while the watch is quiet, in ms
/// ("push and pull, pull is the truth": a missed event is repaired within this).
pub const RESYNC_MS: u64 = 5_000;

/// How often a `file:` registry is checked for changes, in ms.
pub const FILE_POLL_MS: u64 = 500;

/// How long a new provider's weight ramps up linearly from its start time, in ms, when
/// the provider does not advertise its own (Dubbo ramps over 10 minutes for a JVM's JIT;
/// a native provider needs less: caches and connection pools).
pub const WARMUP_MS: u64 = 60_000;

/// How long `axle serve` waits for the application's readiness hook before giving up
/// instead of registering, in ms.
pub const READY_TIMEOUT_MS: u64 = 30_000;

/// A stopping provider waits until no request has arrived for this long (within its drain
/// timeout) before it exits: requests sent before the caller read the goaway then get a
/// `shutting_down` answer, which callers fail over from, instead of a connection reset,
/// which they may not (the request may have run). Several round trips on a LAN.
pub const DRAIN_QUIET: std::time::Duration = std::time::Duration::from_millis(250);
