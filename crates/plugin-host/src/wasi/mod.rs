//! WASI as plugins get it: nothing granted (no files, network, environment or arguments),
//! stdout and stderr into the kernel's log (`output`), and no call that waits.
//!
//! wasmtime-wasi's synchronous bindings are linked first, then Axle's replacements are
//! linked over the interfaces whose calls could block — `wasi:io/streams`, `wasi:io/poll`
//! (`io`) and `wasi:clocks/monotonic-clock` (`clock`) — so that a plugin that prints,
//! polls or sleeps runs the same on a Tokio worker thread as anywhere else, and never
//! holds that thread past its call deadline.

mod clock;
mod io;
pub mod output;

use wasmtime::component::Linker;

use crate::host_state::HostState;

/// Links WASI for plugins.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    io::add_to_linker(linker)?;
    clock::add_to_linker(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}
