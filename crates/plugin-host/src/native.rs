//! Native twins: Rust implementations the host runs in place of a builtin component, so
//! the same request path can be measured with and without the wasm boundary (`axle bench
//! rpc`'s `axle-native` row). A host only has twins when it is given them
//! ([`crate::PluginHost::with_natives`]): this crate knows none (library crates may not
//! depend on the plugin crates), and a twin is found only for `builtin:NAME`, never for a
//! file. Everything around the call stays as it is — the pool and its lock, set
//! interning, answer checking, feedback batching — so the difference between the rows is
//! the boundary alone. Only the selector slot has a seam: it is the one plugin called on
//! every client call (routers are memoised per route shape, the health scorer runs on a
//! timer).

use std::collections::HashMap;
use std::sync::Arc;

use axle_spi::{ConfigValue, EndpointTable, LoadMeasure, Outcome};

/// A selector run natively (the same contract as the `selector` world).
pub trait NativeSelector: Send {
    fn endpoints_changed(&mut self, table: EndpointTable);
    fn define_set(&mut self, id: u32, members: Vec<u32>);
    fn select(&mut self, id: u32, hash_key: u64) -> Option<u32>;
    fn feedback(&mut self, outcomes: &[Outcome]);
    /// `two-choice-selector`'s `measure` (`None`: `select` answers).
    fn measure(&self) -> Option<LoadMeasure> {
        None
    }
    /// `two-choice-selector`'s `select-two`: a packed pair (`axle_spi::pack_pair`).
    fn select_two(&mut self, _id: u32, _hash_key: u64) -> u64 {
        u64::MAX
    }
}

/// Makes a twin from the plugin's flattened config (as a component's `init` gets it).
pub type MakeSelector =
    Arc<dyn Fn(&[(String, ConfigValue)]) -> Result<Box<dyn NativeSelector>, String> + Send + Sync>;

/// The twins a host may use, by builtin name.
#[derive(Clone, Default)]
pub struct Natives {
    selectors: HashMap<String, MakeSelector>,
}

impl Natives {
    /// Runs `make`'s selector wherever the manifest names `builtin:NAME`.
    pub fn selector(mut self, name: &str, make: MakeSelector) -> Self {
        self.selectors.insert(name.to_string(), make);
        self
    }

    /// The twin for a selector loaded from `builtin:NAME`, if one was given.
    pub(crate) fn selector_for(&self, name: &str) -> Option<&MakeSelector> {
        self.selectors.get(name)
    }

    /// Whether no twin was given (the host runs components only).
    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }
}
