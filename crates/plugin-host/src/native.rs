//! Native twins: Rust implementations the host runs in place of a builtin component, so
//! the same request path can be measured with and without the wasm boundary (`axle bench
//! rpc`'s `axle-native` row). A host only has twins when it is given them
//! ([`crate::PluginHost::with_natives`]): this crate knows none (library crates may not
//! depend on the plugin crates), and a twin is found only for `builtin:NAME`, never for a
//! file. Everything around the call stays as it is — the pool and its lock, set
//! interning, answer checking, feedback batching — so the difference between the rows is
//! the boundary alone. The selector and the limiter slots have seams: they are the plugins
//! called on every call, the selector by the caller, the limiter by the provider (routers
//! are memoised per route shape, the health scorer runs on a timer).

use std::collections::HashMap;
use std::sync::Arc;

use axle_spi::{Admission, ConfigValue, EndpointTable, LimitKey, LoadMeasure, Outcome};

/// A selector run natively (the same contract as the `selector` world).
pub trait NativeSelector: Send {
    fn endpoints_changed(&mut self, table: EndpointTable);
    fn define_set(&mut self, id: u32, members: Vec<u32>);
    fn select(&mut self, id: u32, hash_key: u64) -> Option<u32>;
    /// Whether it hears how picks ended (what exporting `feedback` says: the
    /// `learning-selector` world).
    fn wants_feedback(&self) -> bool {
        false
    }
    fn feedback(&mut self, _outcomes: &[Outcome]) {}
    /// `two-choice-selector`'s `measure` (`None`: `select` answers).
    fn measure(&self) -> Option<LoadMeasure> {
        None
    }
    /// Whether it answers runs of picks (what exporting `select-run` says), or with a
    /// measure, runs of pairs (`select-two-run`).
    fn wants_runs(&self) -> bool {
        false
    }
    /// `two-choice-run-selector`'s `select-two-run`: two pairs packed
    /// (`axle_spi::pack_run`, each pair's first then its second).
    fn select_two_run(&mut self, _id: u32) -> u64 {
        u64::MAX
    }
    /// `run-selector`'s `select-run`: up to four picks packed (`axle_spi::pack_run`).
    fn select_run(&mut self, _id: u32) -> u64 {
        u64::MAX
    }
    /// `two-choice-selector`'s `select-two`: a packed pair (`axle_spi::pack_pair`).
    fn select_two(&mut self, _id: u32, _hash_key: u64) -> u64 {
        u64::MAX
    }
}

/// Makes a twin from the plugin's flattened config (as a component's `init` gets it).
pub type MakeSelector =
    Arc<dyn Fn(&[(String, ConfigValue)]) -> Result<Box<dyn NativeSelector>, String> + Send + Sync>;

/// A limiter run natively (the same contract as the `limiter` world, with what the
/// `concurrency-limiter` and `cluster-limiter` worlds add). The kernel keeps the keys and
/// defines each before its first `acquire`, as for a component.
pub trait NativeLimiter: Send {
    fn key_defined(&mut self, id: u32, key: LimitKey);
    /// `acquire`, at the kernel's clock `now_ns`.
    fn acquire(&mut self, key: u32, permits: u32, now_ns: u64) -> Admission;
    /// Whether it hears how admitted requests end (what exporting `release` says).
    fn wants_release(&self) -> bool {
        false
    }
    fn release(&mut self, _key: u32, _permits: u32, _latency_ns: u64, _dropped: bool) {}
    /// Whether it hears provider counts (what exporting `providers-changed` says).
    fn wants_providers(&self) -> bool {
        false
    }
    fn providers_changed(&mut self, _service: &str, _providers: u32) {}
    /// Whether it leases admissions (what exporting `acquire-lease` says).
    fn wants_leases(&self) -> bool {
        false
    }
    /// `acquire-lease`: one permit, and with an admission how many more requests under
    /// `key` the kernel may admit without asking (for [`axle_spi::LEASE_NS`]).
    fn acquire_lease(&mut self, key: u32, now_ns: u64) -> (Admission, u32) {
        (self.acquire(key, 1, now_ns), 0)
    }
    /// The optional `export-state` (`None`: not exported).
    fn export_state(&self) -> Option<Vec<u8>> {
        None
    }
    /// The optional `import-state`; whether it took the state.
    fn import_state(&mut self, _state: &[u8]) -> bool {
        false
    }
}

/// Makes a twin from the plugin's flattened config (as a component's `init` gets it).
pub type MakeLimiter =
    Arc<dyn Fn(&[(String, ConfigValue)]) -> Result<Box<dyn NativeLimiter>, String> + Send + Sync>;

/// The twins a host may use, by builtin name.
#[derive(Clone, Default)]
pub struct Natives {
    selectors: HashMap<String, MakeSelector>,
    limiters: HashMap<String, MakeLimiter>,
}

impl Natives {
    /// Runs `make`'s selector wherever the manifest names `builtin:NAME`.
    pub fn selector(mut self, name: &str, make: MakeSelector) -> Self {
        self.selectors.insert(name.to_string(), make);
        self
    }

    /// Runs `make`'s limiter wherever the manifest names `builtin:NAME`.
    pub fn limiter(mut self, name: &str, make: MakeLimiter) -> Self {
        self.limiters.insert(name.to_string(), make);
        self
    }

    /// The twin for a selector loaded from `builtin:NAME`, if one was given.
    pub(crate) fn selector_for(&self, name: &str) -> Option<&MakeSelector> {
        self.selectors.get(name)
    }

    /// The twin for a limiter loaded from `builtin:NAME`, if one was given.
    pub(crate) fn limiter_for(&self, name: &str) -> Option<&MakeLimiter> {
        self.limiters.get(name)
    }

    /// Whether no twin was given (the host runs components only).
    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty() && self.limiters.is_empty()
    }
}
