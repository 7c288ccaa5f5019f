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

#[cfg(test)]
mod tests {
    //! The limits on real wasmtime instantiation: core modules declaring many memories,
    //! many tables, or memories that each fit the budget but not together.

    use super::*;
    use wasmtime::{Engine, Instance, Module, Store};

    /// Unsigned LEB128, the binary format's integer encoding.
    fn leb(mut n: u32, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A core module (binary format) declaring `memories` memories of `pages` 64 KiB
    /// pages and `tables` funcref tables of `elements` elements.
    fn module(memories: u32, pages: u32, tables: u32, elements: u32) -> Vec<u8> {
        let mut wasm = b"\0asm\x01\0\0\0".to_vec();
        let mut section = |id: u8, entries: u32, entry: &[u8]| {
            if entries == 0 {
                return;
            }
            let mut body = Vec::new();
            leb(entries, &mut body);
            for _ in 0..entries {
                body.extend_from_slice(entry);
            }
            wasm.push(id);
            leb(body.len() as u32, &mut wasm);
            wasm.extend(body);
        };
        // Tables (section 4): funcref, limits with a minimum only.
        let mut table = vec![0x70, 0x00];
        leb(elements, &mut table);
        section(4, tables, &table);
        // Memories (section 5): limits with a minimum only.
        let mut memory = vec![0x00];
        leb(pages, &mut memory);
        section(5, memories, &memory);
        wasm
    }

    fn instantiate(wasm: &[u8], budget_mib: u64) -> Result<(), String> {
        instantiate_all(&[wasm], budget_mib)
    }

    /// Instantiates each module in turn in one store (as a component's core instances
    /// share their component instance's store).
    fn instantiate_all(modules: &[&[u8]], budget_mib: u64) -> Result<(), String> {
        let (engine, _) = crate::engine::new_engine().expect("engine");
        let owner = Owner {
            plugin: "many".into(),
            kind: "selector",
            stats: Arc::new(PluginStats::default()),
        };
        let state = HostState::new(owner, axle_facts::FactsTable::new(), budget_mib << 20);
        let mut store = Store::new(&engine, state);
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        for wasm in modules {
            let module = Module::new(&engine, wasm).expect("a valid module");
            Instance::new(&mut store, &module, &[]).map_err(|e| format!("{e:#}"))?;
        }
        Ok(())
    }

    #[test]
    fn a_few_memories_and_tables_within_the_budget_instantiate() {
        instantiate(&module(4, 1, 4, 8), 64).expect("within every limit");
    }

    #[test]
    fn more_memories_than_the_limit_are_refused() {
        let err = instantiate(&module(MAX_MEMORIES as u32 + 1, 1, 0, 0), 64).unwrap_err();
        assert!(err.contains("memor"), "{err}");
    }

    #[test]
    fn more_tables_than_the_limit_are_refused() {
        // One module may declare at most 100 (the validator's limit); two in one store
        // declare more than the instance's limit between them.
        let hundred = module(0, 0, 100, 1);
        const { assert!(MAX_TABLES < 200) };
        instantiate(&hundred, 64).expect("one module's worth");
        let err = instantiate_all(&[&hundred, &hundred], 64).unwrap_err();
        assert!(err.contains("table"), "{err}");
    }

    #[test]
    fn memories_that_each_fit_share_one_budget() {
        // Eight memories of 1 MiB each: each fits a 4 MiB budget, together they do not.
        instantiate(&module(4, 16, 0, 0), 4).expect("four of them fit");
        let err = instantiate(&module(8, 16, 0, 0), 4).unwrap_err();
        assert!(err.contains("limit"), "{err}");
    }

    #[test]
    fn table_elements_count_against_the_same_budget() {
        // 960 KiB of memory beside a table of 1,000 elements (16 KB) fits 1 MiB; beside
        // one of 10,000 elements (160 KB) it does not.
        instantiate(&module(1, 15, 1, 1_000), 1).expect("fits");
        let err = instantiate(&module(1, 15, 1, 10_000), 1).unwrap_err();
        assert!(err.contains("table"), "{err}");
    }

    #[test]
    fn a_full_instance_pool_is_an_unavailable_fault_that_says_what_to_raise() {
        let engine = Engine::new(&crate::engine::config(Some(1))).expect("a pool of one");
        let module = Module::new(&engine, module(1, 1, 0, 0)).expect("a valid module");
        let store = || {
            let owner = Owner {
                plugin: "pooled".into(),
                kind: "selector",
                stats: Arc::new(PluginStats::default()),
            };
            let mut store = Store::new(
                &engine,
                HostState::new(owner, axle_facts::FactsTable::new(), 64 << 20),
            );
            store.limiter(|s| s as &mut dyn ResourceLimiter);
            store
        };
        let mut first = store();
        Instance::new(&mut first, &module, &[]).expect("the one slot");
        let mut second = store();
        let err = Instance::new(&mut second, &module, &[]).expect_err("no slot left");
        match crate::sandbox::classify(err, &second, 20) {
            crate::stats::Fault::Unavailable(msg) => {
                assert!(msg.contains(crate::engine::SLOTS_ENV), "{msg}")
            }
            other => panic!("not unavailable: {other}"),
        }
        drop(first);
        Instance::new(&mut store(), &module, &[]).expect("the slot is free again");
    }
}
