//! # Axle — an RPC runtime whose strategies are WebAssembly plugins
//!
//! The kernel owns facts (transport, framing, measurements, lifecycle); plugins own
//! decisions (serializers, selectors, routers, health scorers, limiters), loaded as
//! WebAssembly components by name from `plugins.toml`. This crate is the facade: it
//! re-exports the workspace's library crates under one name, and adds what sits on top of
//! them all — the exposure sequence (ready → register → deregister) and the demo services
//! `axle serve` hosts. `docs/architecture.md` draws the crate map.
//!
//! - [`client`] / [`server`] — each side's request path (`pipeline.rs` lists the stages).
//! - [`manifest`] — `plugins.toml`: plugins, slots, governance, endpoints, discovery.
//! - [`plugin`] — the sandboxed plugin host and one module per plugin kind.
//! - [`spi`] — the plugin interface as plain Rust types (what plugins and the kernel share).
//! - [`discovery`] — where providers are (static list, watched file, etcd), groups,
//!   warm-up; [`exposure`] registers a server once it is ready.
//! - [`facts`] — the per-endpoint measurements the kernel owns and plugins read.
//! - [`governance`] — policy tiers, breakers, retry budget, provider guard.
//! - [`swap`] — hot-swap of a running kernel's plugins; [`admin`] — the admin endpoint.
//! - [`wire`] / [`transport`] — frames and multiplexed connections.

pub mod exposure;
pub mod services;

pub use axle_admin as admin;
pub use axle_client as client;
pub use axle_core as core;
pub use axle_core::payload;
pub use axle_discovery as discovery;
pub use axle_facts as facts;
pub use axle_governance as governance;
pub use axle_manifest as manifest;
pub use axle_plugin_host as plugin;
pub use axle_server as server;
pub use axle_spi as spi;
pub use axle_swap as swap;
pub use axle_transport as transport;
pub use axle_wire as wire;

/// The client's health states, events and monitor (a module of the client).
pub use axle_client::health;

/// README's Rust examples, compiled as doc-tests so they keep matching the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExamples;
