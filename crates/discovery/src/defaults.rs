//! Discovery's defaults (the manifest's `defaults` index re-exports them, so every default
//! can be read in one place).

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
