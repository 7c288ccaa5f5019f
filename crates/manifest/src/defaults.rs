//! Every default of the manifest, in one place. Each crate owns its own defaults (the
//! transport's, discovery's, the plugin host's, governance's keys in
//! `axle-governance`'s `config.rs`); this index re-exports them so a reader finds them
//! all here. `docs/manifest.md` and `plugins.toml` quote these; change them where they
//! are defined and only there.

pub use axle_core::endpoint::DEFAULT_WEIGHT as ENDPOINT_WEIGHT;
pub use axle_discovery::defaults::*;
pub use axle_plugin_host::defaults::*;
pub use axle_transport::defaults::*;

/// The embedded default manifest: the repository's `plugins.toml`, so the `axle` binary
/// runs with no file beside it.
pub const EMBEDDED_MANIFEST: &str = include_str!("../../../plugins.toml");

/// The name used for the embedded manifest in messages.
pub const EMBEDDED_MANIFEST_NAME: &str = "<embedded plugins.toml>";

/// A call's whole budget when neither the call nor the manifest says (Dubbo's default).
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_millis(1000);

/// Where `axle serve` listens when `--listen` is not given.
pub const LISTEN: &str = "127.0.0.1:7300";

/// A stopping provider waits until no request has arrived for this long (within its drain
/// timeout) before it exits: requests sent before the caller read the goaway then get a
/// `shutting_down` answer, which callers fail over from, instead of a connection reset,
/// which they may not (the request may have run). Several round trips on a LAN.
pub const DRAIN_QUIET: std::time::Duration = std::time::Duration::from_millis(250);

/// How long a stopping provider gives its closing work (deregistration from the registry)
/// before draining anyway: a slow or unreachable registry does not eat the drain.
pub const CLOSING_WORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
