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

use std::time::Duration;
use wasmtime::{Config, Engine, OptLevel};

/// The epoch period: the granularity of plugin call timeouts.
pub const TICK: Duration = Duration::from_millis(1);

/// Builds the engine and starts its epoch ticker (a thread that stops when the engine is
/// dropped).
pub fn new_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .wasm_backtrace_max_frames(None)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    let engine = Engine::new(&config)?;
    start_ticker(engine.weak());
    Ok(engine)
}

fn start_ticker(engine: wasmtime::EngineWeak) {
    let spawned = std::thread::Builder::new()
        .name("axle-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(TICK);
            match engine.upgrade() {
                Some(e) => e.increment_epoch(),
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
    let tick_ms = TICK.as_millis().max(1) as u64;
    timeout_ms.div_ceil(tick_ms) + 1
}
