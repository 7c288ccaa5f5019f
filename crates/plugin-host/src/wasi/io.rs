//! `wasi:io/streams` and `wasi:io/poll` without waiting.
//!
//! wasmtime-wasi's synchronous bindings run each potentially blocking call (a blocking
//! write, a flush, a poll, a stream's drop) by blocking on an async future with the
//! current Tokio runtime — which panics on a runtime worker ("Cannot start a runtime from
//! within a runtime"), and plugin calls run on runtime workers. These replacements never
//! touch a runtime: a write goes to the stream at once (a plugin's stdout and stderr are
//! [`super::output`]'s line sinks, which are always ready), a readiness check polls once,
//! and a wait that would have to block (a sleep, a poll with nothing ready) refuses with a
//! trap the sandbox counts as a `blocked` fault. A plugin runs within a call deadline of
//! milliseconds: there is nothing to wait for.

use futures::FutureExt;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, StreamError, StreamResult};
use wasmtime_wasi_io::bindings::wasi::io::poll::HostPollable as TablePollable;
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    Host as TableStreams, HostInputStream as TableInput, HostOutputStream as TableOutput,
};

use crate::host_state::HostState;

/// What a refused wait traps with (the sandbox recognises it by [`HostState::blocked`]).
const WAIT_REFUSED: &str = "the plugin tried to wait (a sleep, or a poll with nothing ready): \
     plugins run within their call deadline and may not block";

/// The streams and pollables of one store, seen by the replacements.
pub(crate) struct SyncIo<'a> {
    table: &'a mut ResourceTable,
    blocked: &'a mut bool,
}

struct SyncIoData;

impl HasData for SyncIoData {
    type Data<'a> = SyncIo<'a>;
}

fn sync_io(state: &mut HostState) -> SyncIo<'_> {
    SyncIo {
        table: &mut state.table,
        blocked: &mut state.blocked,
    }
}

/// Links the replacements over wasmtime-wasi's (the linker must allow shadowing).
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    poll::add_to_linker::<HostState, SyncIoData>(linker, sync_io)?;
    streams::add_to_linker::<HostState, SyncIoData>(linker, sync_io)?;
    Ok(())
}

impl SyncIo<'_> {
    /// Whether `pollable` is ready now, from one poll of its readiness future. The
    /// pollables a sandboxed plugin can make (its own streams, Axle's timers) resolve
    /// without a runtime.
    fn ready_now(&mut self, pollable: &Resource<DynPollable>) -> wasmtime::Result<bool> {
        let borrowed = Resource::new_borrow(pollable.rep());
        TablePollable::ready(self.table, borrowed)
            .now_or_never()
            .unwrap_or(Ok(false))
    }

    fn refuse_wait(&mut self) -> wasmtime::Error {
        *self.blocked = true;
        wasmtime::format_err!("{WAIT_REFUSED}")
    }
}

impl poll::Host for SyncIo<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        if pollables.is_empty() {
            wasmtime::bail!("empty poll list");
        }
        let mut ready = Vec::new();
        for (i, p) in pollables.iter().enumerate() {
            if self.ready_now(p)? {
                ready.push(u32::try_from(i)?);
            }
        }
        if ready.is_empty() {
            return Err(self.refuse_wait());
        }
        Ok(ready)
    }
}

impl poll::HostPollable for SyncIo<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        self.ready_now(&pollable)
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        if self.ready_now(&pollable)? {
            Ok(())
        } else {
            Err(self.refuse_wait())
        }
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        TablePollable::drop(self.table, pollable)
    }
}

impl streams::Host for SyncIo<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        Ok(match TableStreams::convert_stream_error(self.table, err)? {
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::Closed => {
                streams::StreamError::Closed
            }
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::LastOperationFailed(e) => {
                streams::StreamError::LastOperationFailed(e)
            }
        })
    }
}

/// Blocking writes take at most this much at once (the WASI contract).
const BLOCKING_WRITE_MAX: usize = 4096;

impl streams::HostOutputStream for SyncIo<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        // Dropped here and now: Axle's sinks emit what they hold when dropped.
        self.table.delete(stream)?;
        Ok(())
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        TableOutput::check_write(self.table, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        TableOutput::write(self.table, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        if bytes.len() > BLOCKING_WRITE_MAX {
            return Err(StreamError::trap(
                "buffer too large for blocking-write-and-flush (at most 4096 bytes)",
            ));
        }
        let s = self.table.get_mut(&stream)?;
        s.write(bytes.into())?;
        s.flush()
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        if len > BLOCKING_WRITE_MAX as u64 {
            return Err(StreamError::trap(
                "too many zeroes for blocking-write-zeroes-and-flush (at most 4096)",
            ));
        }
        let s = self.table.get_mut(&stream)?;
        s.write_zeroes(len as usize)?;
        s.flush()
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        TableOutput::subscribe(self.table, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        TableOutput::write_zeroes(self.table, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        TableOutput::flush(self.table, Resource::new_borrow(stream.rep()))
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        self.table.get_mut(&stream)?.flush()
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        TableOutput::splice(self.table, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        // What is there now: a plugin's input is empty, so there is nothing to wait for.
        TableOutput::splice(self.table, dst, src, len)
    }
}

impl streams::HostInputStream for SyncIo<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        self.table.delete(stream)?;
        Ok(())
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        TableInput::read(self.table, stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        TableInput::read(self.table, stream, len)
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        TableInput::skip(self.table, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        TableInput::skip(self.table, stream, len)
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        TableInput::subscribe(self.table, stream)
    }
}
