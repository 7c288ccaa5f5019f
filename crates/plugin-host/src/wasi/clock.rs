//! `wasi:clocks/monotonic-clock` on the kernel clock, with timers that need no runtime.
//!
//! wasmtime-wasi's timers are Tokio sleeps, which can only be polled inside a runtime and
//! only be waited for by blocking one. A plugin's timer here is a plain instant: ready
//! once it has passed, checked with one look at the clock. Waiting for one that has not
//! passed is refused (`io.rs`), so a plugin's `sleep` costs it a counted fault instead of
//! stalling a runtime thread.

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{subscribe, DynPollable, Pollable};

use crate::host_state::HostState;

/// A plugin's timer: ready once the kernel clock (virtual under `axle sim`) reaches
/// `at` nanoseconds (`None`: never).
struct Timer {
    at: Option<u64>,
}

#[async_trait::async_trait]
impl Pollable for Timer {
    async fn ready(&mut self) {
        match self.at {
            Some(at) if axle_core::now_ns() >= at => {}
            _ => std::future::pending().await,
        }
    }
}

struct ClockData;

impl HasData for ClockData {
    type Data<'a> = &'a mut HostState;
}

/// Links the clock over wasmtime-wasi's (the linker must allow shadowing).
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    monotonic_clock::add_to_linker::<HostState, ClockData>(linker, |s| s)
}

fn timer_in(state: &mut HostState, ns: u64) -> wasmtime::Result<Resource<DynPollable>> {
    let at = axle_core::now_ns().checked_add(ns);
    let timer = state.table.push(Timer { at })?;
    subscribe(&mut state.table, timer)
}

impl monotonic_clock::Host for &mut HostState {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(axle_core::now_ns())
    }

    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(1)
    }

    fn subscribe_instant(&mut self, when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let ns = when.saturating_sub(axle_core::now_ns());
        timer_in(self, ns)
    }

    fn subscribe_duration(&mut self, ns: u64) -> wasmtime::Result<Resource<DynPollable>> {
        timer_in(self, ns)
    }
}
