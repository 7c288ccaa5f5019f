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

// ---- what a consumer accepts from etcd (`[discovery.etcd]`) -------------------------
//
// Whoever can write under `/axle/` in etcd decides where consumers send requests. These
// caps bound what one registry entry can cost a consumer (memory, log lines, connections)
// even when that writer is hostile or broken; an entry over any of them is skipped and
// logged, never dialled.

/// The largest registry value a consumer parses, in bytes. A provider's own value is a few
/// hundred bytes (an address, a weight, a handful of tags); this leaves room for
/// [`MAX_TAGS`] tags of [`MAX_TAG_BYTES`] while refusing megabyte values before they
/// are parsed (etcd itself accepts values up to 1.5 MiB).
pub const MAX_VALUE_BYTES: usize = 16 * 1024;

/// The most tags one provider may carry (`zone` and `version` count as tags). Routers
/// match on a few (lane, version, zone); dozens is already a misuse.
pub const MAX_TAGS: usize = 32;

/// The longest tag key or value, `zone` and `version`, in bytes: tags become log fields
/// and router inputs, so they stay short.
pub const MAX_TAG_BYTES: usize = 256;

/// The most providers a consumer keeps for one discovery key (service and group): every
/// one may get a connection pool, so a registry flooded with keys must not open
/// thousands of connections. A listing keeps the first ones in key order.
pub const MAX_INSTANCES_PER_SERVICE: usize = 1024;

/// At most this many warnings about skipped registry entries per discovery key per
/// minute (each entry revision is reported once; past the budget the count is logged
/// instead), so a hostile writer cannot flood the log.
pub const SKIP_WARNINGS_PER_MINUTE: u32 = 20;
