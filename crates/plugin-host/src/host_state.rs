//! What a plugin's store holds: a WASI context with nothing granted (its stdout and stderr
//! go to the kernel's log, `wasi/output.rs`), the resource limits, and the kernel facts
//! behind the `host` imports.
//!
//! Limits hold per instance, whatever the guest does: linear memories and tables count
//! against ONE memory budget together (a guest cannot multiply its limit by making more
//! memories), and the number of core instances, memories and tables a component may
//! create is small and fixed ([`MAX_INSTANCES`], [`MAX_MEMORIES`], [`MAX_TABLES`]).

use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::base::axle::spi::{host, types};
use super::bindings::wit;
use crate::stats::PluginStats;
use crate::wasi::output::{PluginOutput, Stream, MAX_LINE};
use axle_facts::FactsTable;

/// Core instances one component instance may create (a Python or JS component makes a
/// few dozen; a Rust or C one, a handful).
pub const MAX_INSTANCES: usize = 128;
/// Linear memories one instance may create.
pub const MAX_MEMORIES: usize = 16;
/// Tables one instance may create.
pub const MAX_TABLES: usize = 128;
/// What one table element counts against the memory budget, in bytes.
const TABLE_ELEMENT_BYTES: usize = 16;

/// The data of one plugin instance's `Store`.
pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    plugin: Arc<str>,
    facts: Arc<FactsTable>,
    stats: Arc<PluginStats>,
    max_memory_bytes: usize,
    /// Bytes of every memory and table of this instance, together.
    used_bytes: usize,
    /// Set when the guest asked for more memory than its limit (the trap that follows is
    /// then reported as a memory fault, not a generic one).
    pub(crate) memory_denied: bool,
    /// Set when the guest tried to wait (`wasi/io.rs`): reported as a `blocked` fault.
    pub(crate) blocked: bool,
}

/// Who a store belongs to (for its log lines).
pub struct Owner {
    pub plugin: Arc<str>,
    pub kind: &'static str,
    /// Its counters, with the log budget its output draws on.
    pub stats: Arc<PluginStats>,
}

impl HostState {
    pub fn new(owner: Owner, facts: Arc<FactsTable>, max_memory_bytes: u64) -> Self {
        let stream = |stream| PluginOutput {
            plugin: owner.plugin.clone(),
            kind: owner.kind,
            stream,
            stats: owner.stats.clone(),
        };
        HostState {
            // No preopens, no environment, no arguments, no sockets, no network; stdout
            // and stderr are the kernel's log; stdin is empty.
            wasi: WasiCtx::builder()
                .stdout(stream(Stream::Stdout))
                .stderr(stream(Stream::Stderr))
                .build(),
            table: ResourceTable::new(),
            plugin: owner.plugin,
            facts,
            stats: owner.stats,
            max_memory_bytes: usize::try_from(max_memory_bytes).unwrap_or(usize::MAX),
            used_bytes: 0,
            memory_denied: false,
            blocked: false,
        }
    }

    /// Grows the instance's use from `current` to `desired` bytes of one memory or
    /// table, if the whole instance stays within its limit.
    fn grow(&mut self, current: usize, desired: usize) -> bool {
        let total = self
            .used_bytes
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.max_memory_bytes {
            self.memory_denied = true;
            return false;
        }
        self.used_bytes = total;
        true
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
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !self.grow(current, desired) {
            wasmtime::bail!(
                "memory limit reached: wanted {} MiB in all, limit {} MiB",
                (self.used_bytes - current + desired) >> 20,
                self.max_memory_bytes >> 20
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let bytes = |n: usize| n.saturating_mul(TABLE_ELEMENT_BYTES);
        Ok(self.grow(bytes(current), bytes(desired)))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
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

    /// Same budget and line cap as the plugin's stdout and stderr.
    fn log(&mut self, level: wit::LogLevel, mut message: String) {
        let Some(dropped) = self.stats.output.take() else {
            return;
        };
        if message.len() > MAX_LINE {
            let mut end = MAX_LINE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        let plugin = &*self.plugin;
        match level {
            wit::LogLevel::Trace => tracing::trace!(target: "plugin", plugin, dropped, "{message}"),
            wit::LogLevel::Debug => tracing::debug!(target: "plugin", plugin, dropped, "{message}"),
            wit::LogLevel::Info => tracing::info!(target: "plugin", plugin, dropped, "{message}"),
            wit::LogLevel::Warn => tracing::warn!(target: "plugin", plugin, dropped, "{message}"),
            wit::LogLevel::Error => tracing::error!(target: "plugin", plugin, dropped, "{message}"),
        }
    }
}
