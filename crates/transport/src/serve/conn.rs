//! One provider connection: read frames, run each request as its own task, answer pings,
//! honour cancels; refuse past the per-connection caps; close what idles, stalls
//! mid-frame or is evicted; cancel the handlers of a caller that left.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use super::registry::Admitted;
use super::{Dispatch, Peer, ServeLimits};
use axle_wire::{Compression, ErrorClass, Frame, FrameCodec, Kind, WireError};

/// A request being handled in its own task: how to cancel it, and whether it survives
/// its caller leaving.
struct Running {
    abort: AbortHandle,
    keeps_running: bool,
}

type InFlight = Arc<Mutex<HashMap<u64, Running>>>;

/// How long a connection that sent its goaway waits, with nothing in flight and nothing
/// arriving, before it closes (requests sent before the caller read the goaway still get
/// their `shutting_down` answer).
const GOAWAY_LINGER: Duration = Duration::from_millis(200);

/// Why the read loop ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The caller closed, or the connection broke: cancel what it left.
    Gone,
    /// We closed it (idle, stalled, evicted, after the goaway): nothing is in flight,
    /// or what is should finish.
    Closed,
}

/// One connection's loop.
pub(super) struct Conn<D> {
    peer: Arc<Peer>,
    dispatch: Arc<D>,
    limits: ServeLimits,
    place: Admitted,
    in_flight: InFlight,
    /// Payload bytes of the requests in flight.
    buffered: Arc<AtomicUsize>,
}

impl<D: Dispatch> Conn<D> {
    pub(super) fn new(
        peer: Arc<Peer>,
        dispatch: Arc<D>,
        limits: ServeLimits,
        place: Admitted,
    ) -> Self {
        Conn {
            peer,
            dispatch,
            limits,
            place,
            in_flight: Arc::default(),
            buffered: Arc::default(),
        }
    }

    /// Serves until the caller leaves, the connection breaks or is closed; then cancels
    /// the handlers nobody waits for and lets the writer send what is queued.
    pub(super) async fn run<R, W>(self, read: R, write: W, closing: watch::Receiver<bool>)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::channel::<Frame>(crate::defaults::WRITE_QUEUE);
        let writer = tokio::spawn(crate::writer::run(
            write,
            rx,
            self.limits.frame,
            |frame, err| {
                // A response over the limit becomes an error the caller can read.
                Some(Frame::error(
                    frame.id,
                    ErrorClass::Internal,
                    format!("the response cannot be sent: {err}"),
                ))
            },
        ));
        let end = self.read_loop(read, &tx, closing).await;
        if end == End::Gone {
            let cancel: Vec<AbortHandle> = {
                let running = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                running
                    .values()
                    .filter(|r| !r.keeps_running)
                    .map(|r| r.abort.clone())
                    .collect()
            };
            for handle in cancel {
                handle.abort();
            }
        }
        // What is queued (and what the handlers still running answer) goes out, then the
        // writer closes the socket.
        drop(tx);
        let _ = writer.await;
    }

    async fn read_loop<R: AsyncRead + Unpin>(
        &self,
        read: R,
        tx: &mpsc::Sender<Frame>,
        mut closing: watch::Receiver<bool>,
    ) -> End {
        let mut frames = FramedRead::new(read, FrameCodec::new(self.limits.frame));
        let mut goaway_sent = false;
        if *closing.borrow() {
            let _ = tx.send(Frame::goaway("shutting down")).await;
            goaway_sent = true;
        }
        let state = &self.place.state;
        // Checks run at most every frame-timeout (and often after a goaway): one timer
        // per connection, re-armed, never a tick per connection.
        let check_every = self
            .limits
            .frame_timeout
            .min(self.limits.idle_timeout)
            .max(Duration::from_millis(10));
        let check = tokio::time::sleep(check_every);
        tokio::pin!(check);
        // When a check first saw part of a frame waiting.
        let mut partial_since: Option<Instant> = None;
        loop {
            let next = tokio::select! {
                next = frames.next() => next,
                changed = closing.changed(), if !goaway_sent => {
                    if changed.is_ok() && *closing.borrow() {
                        let _ = tx.send(Frame::goaway("shutting down")).await;
                        goaway_sent = true;
                        check.as_mut().reset(Instant::now() + GOAWAY_LINGER);
                    }
                    continue;
                }
                _ = state.close.notified() => {
                    let _ = tx.send(Frame::goaway("connection limit reached; reconnect")).await;
                    return End::Closed;
                }
                _ = &mut check => {
                    let now = Instant::now();
                    let idle = self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
                    if frames.read_buffer().is_empty() {
                        partial_since = None;
                    } else if partial_since.is_some_and(|t| now - t >= self.limits.frame_timeout) {
                        tracing::warn!(peer = %self.peer.addr, "closing the connection: a frame did not finish arriving within {:?}", self.limits.frame_timeout);
                        return End::Gone;
                    } else {
                        partial_since.get_or_insert(now);
                    }
                    // Since the last frame (or the connection's start): the registry's clock.
                    let quiet = Duration::from_nanos(
                        axle_core::now_ns().saturating_sub(state.last_active_ns.load(Relaxed)),
                    );
                    if idle && partial_since.is_none() {
                        if goaway_sent && quiet >= GOAWAY_LINGER {
                            return End::Closed;
                        }
                        if quiet >= self.limits.idle_timeout {
                            let _ = tx.send(Frame::goaway("idle")).await;
                            return End::Closed;
                        }
                    }
                    let next = if goaway_sent { GOAWAY_LINGER } else { check_every };
                    check.as_mut().reset(now + next);
                    continue;
                }
            };
            let frame = match next {
                None => return End::Gone,
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    if peer_went_away(&e) {
                        // A peer closing its socket (over TLS: without close_notify, as
                        // most clients do) is how connections end, not a fault.
                        tracing::debug!(peer = %self.peer.addr, "the peer closed the connection: {e}");
                    } else {
                        tracing::warn!(peer = %self.peer.addr, "closing the connection: {e}");
                    }
                    if let WireError::Version(_) = e {
                        let _ = tx.send(Frame::goaway(e.to_string())).await;
                    }
                    return End::Gone;
                }
            };
            // One reading per frame: the connection's last activity, and a request's
            // arrival (`Dispatch::dispatch`).
            let arrived = std::time::Instant::now();
            state
                .last_active_ns
                .store(axle_core::ns_at(arrived), Relaxed);
            match frame.kind {
                Kind::Request => self.request(frame, tx, arrived).await,
                Kind::Cancel => {
                    let running = self
                        .in_flight
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&frame.id);
                    if let Some(r) = running {
                        r.abort.abort();
                        state.in_flight.fetch_sub(1, Relaxed);
                    }
                }
                Kind::Ping => {
                    let mut pong = Frame::bare(Kind::Pong, frame.id);
                    pong.meta.accept_encoding = self.limits.frame.compression.accepts();
                    let _ = tx.send(pong).await;
                }
                Kind::Pong | Kind::Response | Kind::Goaway => {}
            }
        }
    }

    /// Runs one request: refused past the connection's caps, answered inline when it
    /// finishes on its first poll, else in its own task.
    async fn request(
        &self,
        mut frame: Frame,
        tx: &mpsc::Sender<Frame>,
        arrived: std::time::Instant,
    ) {
        let id = frame.id;
        // Plain before anything else sees it; a payload past the bounds is the request's
        // own error, not the connection's.
        if let Err(e) = crate::encoding::incoming(&mut frame, self.limits.frame.max_frame) {
            let _ = tx
                .send(Frame::error(id, ErrorClass::BadRequest, e.to_string()))
                .await;
            return;
        }
        let compression = self.limits.frame.compression;
        let accepts = frame.meta.accept_encoding;
        let size = frame.payload.len();
        let count = self.place.state.in_flight.load(Relaxed);
        let bytes = self.buffered.load(Relaxed);
        if count >= self.limits.max_requests
            || bytes.saturating_add(size) > self.limits.max_buffered_bytes
        {
            let why = if count >= self.limits.max_requests {
                format!("{count} requests in flight on this connection")
            } else {
                format!("{bytes} bytes of requests in flight on this connection")
            };
            let _ = tx.send(Frame::error(id, ErrorClass::Overloaded, why)).await;
            return;
        }
        let keeps_running = self.dispatch.keeps_running(&frame);
        let mut response = self.dispatch.clone().dispatch(frame, &self.peer, arrived);
        // Most requests finish on their first poll (echo, a cache hit, a refusal):
        // answer those inline and spawn a task only for the ones that wait.
        if let std::task::Poll::Ready(r) = futures::poll!(response.as_mut()) {
            let _ = tx.send(answer(&compression, r, accepts)).await;
            return;
        }
        let tx = tx.clone();
        let map = self.in_flight.clone();
        let state = self.place.state.clone();
        let buffered = self.buffered.clone();
        buffered.fetch_add(size, Relaxed);
        state.in_flight.fetch_add(1, Relaxed);
        // Hold the map while spawning, so the task's own removal comes after the
        // insertion and no finished request is left behind in it.
        let mut running = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        // Given back however the task ends: answered, cancelled, or aborted even before
        // its first poll (the future, and this with it, is dropped then).
        let release = Release {
            buffered,
            size,
            map,
            id,
            state,
        };
        let task = tokio::spawn(async move {
            let _release = release;
            let response = response.await;
            let _ = tx.send(answer(&compression, response, accepts)).await;
        });
        running.insert(
            id,
            Running {
                abort: task.abort_handle(),
                keeps_running,
            },
        );
    }
}

/// The response as it goes out: compressed when this side compresses and the request
/// said its sender `accepts` the encoding, and saying what this side accepts.
fn answer(compression: &Compression, mut response: Frame, accepts: u8) -> Frame {
    if compression.encoding.is_some() {
        crate::encoding::outgoing(compression, &mut response, accepts);
    }
    response
}

/// Gives back a request's place in its connection's counts when its task ends.
struct Release {
    buffered: Arc<AtomicUsize>,
    size: usize,
    map: InFlight,
    id: u64,
    state: Arc<super::ConnState>,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.buffered.fetch_sub(self.size, Relaxed);
        let removed = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        // A cancel frame already removed it and gave back its count.
        if removed.is_some() {
            self.state.in_flight.fetch_sub(1, Relaxed);
        }
    }
}

/// Whether a read error only says the peer hung up (reset, or end of stream where TLS
/// wanted a close_notify first), as opposed to sending something wrong.
fn peer_went_away(e: &WireError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(e, WireError::Io(io) if matches!(io.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe))
}
