//! # Axle — an RPC runtime whose strategies are WebAssembly plugins
//!
//! The kernel owns facts (transport, framing, stats, lifecycle); plugins own decisions
//! (serializers, selectors, routers, health scorers, limiters), loaded as WebAssembly
//! components by name from `plugins.toml`. See `DESIGN.md` for the map.
//!
//! - [`manifest`] — `plugins.toml`: plugins, limits, slot choices, validation.
//! - [`plugin`] — the sandboxed plugin host and one file per plugin kind.
//! - [`discovery`] — where providers are (static list, watched file, etcd), groups,
//!   registration, warm-up.
//! - [`facts`] — the per-endpoint facts the kernel measures and plugins read.
//! - [`bench`] — `axle bench plugins`.
//! - [`admin`] — the loopback admin endpoint (`axle stats --admin`).

pub mod admin;
pub mod bench;
pub mod client;
pub mod discovery;
pub mod facts;
pub mod governance;
pub mod health;
pub mod manifest;
pub mod payload;
pub mod plugin;
pub mod server;
pub mod services;
pub mod swap;
pub mod transport;
pub mod wire;
