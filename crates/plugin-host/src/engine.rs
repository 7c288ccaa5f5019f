//! The one wasmtime `Engine` of a kernel, and the ticker that bounds every plugin call.
//!
//! Epoch interruption, not fuel: it costs ~5% per call instead of ~7%
//! (`docs/architecture.md`, "What a call costs") and bounds wall time, which is what a
//! request's deadline is made of. The ticker bumps the epoch every [`TICK`]; a call's
//! deadline is its plugin's `timeout-ms` in ticks.
//!
//! No wasm backtraces on traps: capturing one walks the guest's stack on every fault,
//! which a plugin that faults often turns into a cost on the request path; what a fault
//! needs to say (its cause, the guest's own panic message in the log) is kept.
//!
//! Instances come from a pool of slots reserved once (wasmtime's pooling allocator), not
//! from fresh mappings. A faulted instance is replaced off the request path, but with
//! per-instance mappings every replacement still costs the request path: unmapping the
//! dead store and the copy-on-write faults of the new one each flush the TLB of every
//! core running the kernel, by an interrupt (`docs/sandbox.md`, "Instance slots"). A
//! pooled slot keeps its plugin's memory image mapped and its dirty pages resident: the
//! next instance of the same plugin finds them reset by a copy, and a replacement touches
//! no other core. [`SLOTS_ENV`] sizes the pool; if it cannot be reserved, instances are
//! mapped one by one as before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use crate::host_state::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLES};

/// The epoch period: the granularity of plugin call timeouts.
pub const TICK: Duration = Duration::from_millis(1);

/// The environment variable that sets how many plugin instances the pool holds at once
/// (`0`: no pool, each instance mapped on its own).
pub const SLOTS_ENV: &str = "AXLE_PLUGIN_SLOTS";

/// Set (to anything but `0`), wasmtime writes `/tmp/perf-PID.map` naming the compiled
/// code of every plugin, so `perf report` shows a plugin's own functions instead of bare
/// addresses (`docs/performance.md`, "Profiling a plugin's own code"). Off by default:
/// the file grows with every component the process loads.
pub const PERF_MAP_ENV: &str = "AXLE_PERF_MAP";

/// Plugin instances alive at once by default. A kernel runs one instance per stateful
/// plugin and one per core per serializer, plus a spare for each plugin that has faulted
/// and, during a swap, the old and new side by side: a few dozen on a small machine, a
/// few hundred on a large one. Each slot reserves address space for one 4 GiB linear
/// memory (virtual, not resident).
pub const DEFAULT_SLOTS: u32 = 1000;

/// Dirty bytes of a freed memory slot reset in place by a copy and kept resident (the
/// rest is given back to the kernel by `madvise`, which flushes the TLB): a Rust or C
/// plugin's whole working set.
const KEEP_RESIDENT: usize = 2 << 20;

/// Elements one pooled table may hold (a JS or Python runtime's function table is tens
/// of thousands; the memory budget counts them anyway, `host_state.rs`).
const TABLE_ELEMENTS: usize = 1 << 20;

/// Wall time in ticks since the engine was made, as its ticker last saw it: read by one
/// load, where a clock reading costs tens of nanoseconds (`docs/performance.md`, "Four
/// runs in one hold of the lock"). Set from the clock at each wake-up, not counted up by
/// one, so it does not drift as wake-ups come late on a loaded machine: it lags wall time
/// by the ticker's last wake-up's lateness and at most one [`TICK`] more
/// (`kinds/selector/runs.rs` times an ask of a run-selector by it). One per engine, so
/// that hosts in one process (tests) keep their own.
#[derive(Clone, Debug, Default)]
pub struct Ticks(Arc<AtomicU64>);

impl Ticks {
    /// Ticks made so far.
    #[inline]
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// The ticker woke `since` after the engine was made.
    fn set(&self, since: Duration) {
        let ticks = since.as_nanos() / TICK.as_nanos().max(1);
        self.0.store(ticks as u64, Ordering::Relaxed);
    }
}

/// Builds the engine and starts its epoch ticker (a thread that stops when the engine is
/// dropped), which counts its ticks in the [`Ticks`] returned beside the engine.
pub fn new_engine() -> wasmtime::Result<(Engine, Ticks)> {
    let slots = match slots_from_env(std::env::var(SLOTS_ENV).ok().as_deref()) {
        Ok(slots) => slots,
        Err(e) => return Err(wasmtime::Error::msg(e)),
    };
    let engine = match slots {
        0 => Engine::new(&config(None))?,
        n => match Engine::new(&config(Some(n))) {
            Ok(engine) => engine,
            Err(e) => {
                // A host that limits address space (`ulimit -v`) cannot reserve the pool;
                // plugins still run, each instance mapped on its own.
                tracing::warn!(
                    slots = n,
                    "cannot reserve the plugin instance pool ({e:#}); mapping each \
                     instance on its own (set {SLOTS_ENV} lower, or 0 to silence this)"
                );
                Engine::new(&config(None))?
            }
        },
    };
    let ticks = Ticks::default();
    start_ticker(engine.weak(), ticks.clone());
    Ok((engine, ticks))
}

/// Reads [`SLOTS_ENV`]: unset means [`DEFAULT_SLOTS`].
fn slots_from_env(value: Option<&str>) -> Result<u32, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(DEFAULT_SLOTS),
        Some(v) => v
            .parse()
            .map_err(|_| format!("{SLOTS_ENV}={v}: a number of plugin instances (0: no pool)")),
    }
}

/// The engine's configuration, with a pool of `slots` instances or none.
pub(crate) fn config(slots: Option<u32>) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .wasm_backtrace_max_frames(None)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    if std::env::var_os(PERF_MAP_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(slots) = slots {
        let mut pool = PoolingAllocationConfig::new();
        // Instances are counted, not reserved: room for the core instances of each
        // component (a few for Rust or C, dozens for Python or JS). Memories and tables
        // reserve address space: one of each per slot, more where a runtime needs them.
        pool.total_component_instances(slots)
            .total_core_instances(slots.saturating_mul(MAX_INSTANCES as u32 / 4))
            .total_memories(slots)
            .total_tables(slots.saturating_mul(2))
            // Above the store's own limits, so that those (`host_state.rs`) refuse a
            // guest that asks too much, with their message, at instantiation.
            .max_memories_per_module(2 * MAX_MEMORIES as u32)
            .max_tables_per_module(2 * MAX_TABLES as u32)
            .max_core_instances_per_component(2 * MAX_INSTANCES as u32)
            .table_elements(TABLE_ELEMENTS)
            .max_core_instance_size(16 << 20)
            .max_component_instance_size(16 << 20)
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(64 << 10)
            .max_unused_warm_slots(16);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

fn start_ticker(engine: wasmtime::EngineWeak, ticks: Ticks) {
    let made = std::time::Instant::now();
    let spawned = std::thread::Builder::new()
        .name("axle-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(TICK);
            match engine.upgrade() {
                Some(e) => {
                    e.increment_epoch();
                    ticks.set(made.elapsed());
                }
                None => return,
            }
        });
    if let Err(e) = spawned {
        // Without a ticker, deadlines never fire; calls still work. Say so loudly.
        tracing::error!("cannot start the epoch ticker, plugin calls are unbounded: {e}");
    }
}

/// Deadline in ticks for a timeout: one extra tick, because the next tick may come at
/// any moment after the deadline is set.
pub fn deadline_ticks(timeout_ms: u64) -> u64 {
    ticks_in(timeout_ms) + 1
}

/// Whole ticks in `ms` milliseconds, rounded up.
pub fn ticks_in(ms: u64) -> u64 {
    let tick_ms = TICK.as_millis().max(1) as u64;
    ms.div_ceil(tick_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_default_parse_and_refuse_garbage() {
        assert_eq!(slots_from_env(None), Ok(DEFAULT_SLOTS));
        assert_eq!(slots_from_env(Some(" ")), Ok(DEFAULT_SLOTS));
        assert_eq!(slots_from_env(Some("0")), Ok(0));
        assert_eq!(slots_from_env(Some("64")), Ok(64));
        let err = slots_from_env(Some("many")).unwrap_err();
        assert!(err.contains(SLOTS_ENV) && err.contains("many"), "{err}");
    }

    /// Waits until `ticks` has made `n` more (failing after 30 s without them).
    fn wait_for(ticks: &Ticks, n: u64) {
        let from = ticks.now();
        let waited = std::time::Instant::now();
        while ticks.now() < from + n {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the ticker never ticked"
            );
            std::thread::sleep(TICK);
        }
    }

    #[test]
    fn each_engine_keeps_its_own_ticks_until_it_is_dropped() {
        let (a, a_ticks) = new_engine().expect("engine");
        let (_b, b_ticks) = new_engine().expect("engine");
        wait_for(&a_ticks, 3);
        drop(a);
        // The ticker ends at its next wake-up, and drops its handle on the count.
        let waited = std::time::Instant::now();
        while Arc::strong_count(&a_ticks.0) > 1 {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the ticker ran on"
            );
            std::thread::sleep(TICK);
        }
        let left = a_ticks.now();
        wait_for(&b_ticks, 5);
        assert_eq!(a_ticks.now(), left, "a dropped engine's ticks stand still");
    }

    #[test]
    fn ticks_are_whole_ticks_of_the_time_since_the_engine_was_made() {
        let ticks = Ticks::default();
        ticks.set(TICK * 5 / 2);
        assert_eq!(ticks.now(), 2);
        ticks.set(TICK * 1000);
        assert_eq!(ticks.now(), 1000, "a late wake-up catches up at once");
    }

    #[test]
    fn a_pooled_engine_and_an_unpooled_one_both_build() {
        Engine::new(&config(Some(8))).expect("a small pool");
        Engine::new(&config(None)).expect("no pool");
    }
}
