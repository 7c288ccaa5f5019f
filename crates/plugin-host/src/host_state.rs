//! What a plugin's store holds: an empty WASI context (nothing granted), the memory limit,
//! and the kernel facts behind the `host` imports.

use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::base::axle::spi::{host, types};
use super::bindings::wit;
use axle_facts::FactsTable;

/// The data of one plugin instance's `Store`.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    plugin: Arc<str>,
    facts: Arc<FactsTable>,
    max_memory_bytes: usize,
    /// Set when the guest asked for more memory than its limit (the trap that follows is
    /// then reported as a memory fault, not a generic one).
    pub(crate) memory_denied: bool,
}

impl HostState {
    pub fn new(plugin: Arc<str>, facts: Arc<FactsTable>, max_memory_bytes: u64) -> Self {
        HostState {
            // No preopens, no environment, no arguments, no sockets, no inherited stdio:
            // guests that link WASI (std's panic printing, Python, JS) find it empty.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            plugin,
            facts,
            max_memory_bytes: usize::try_from(max_memory_bytes).unwrap_or(usize::MAX),
            memory_denied: false,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory_bytes {
            self.memory_denied = true;
            wasmtime::bail!(
                "memory limit reached: wanted {} MiB, limit {} MiB",
                desired >> 20,
                self.max_memory_bytes >> 20
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A table of a million entries is no strategy's business.
        Ok(desired <= 1 << 20)
    }
}

impl types::Host for HostState {}

impl host::Host for HostState {
    fn now_ns(&mut self) -> u64 {
        axle_core::now_ns()
    }

    fn random(&mut self) -> u64 {
        fastrand::u64(..)
    }

    fn facts(&mut self, id: wit::EndpointId) -> Option<wit::EndpointFacts> {
        self.facts.snapshot(id).map(crate::convert::facts)
    }

    fn in_flight(&mut self, id: wit::EndpointId) -> u32 {
        self.facts.in_flight(id)
    }

    fn log(&mut self, level: wit::LogLevel, message: String) {
        let plugin = &*self.plugin;
        match level {
            wit::LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            wit::LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            wit::LogLevel::Info => tracing::info!(plugin, "{message}"),
            wit::LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            wit::LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}
