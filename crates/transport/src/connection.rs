//! The caller's side of one connection: send requests, match responses by id.
//!
//! A reader task routes each response to the waiting call through its answer slot
//! (`answer.rs`, reused: no allocation per request); the
//! writer task (`writer.rs`) batches outgoing frames. A sent call waits on its slot alone
//! ([`Sent`]): it holds no handle on the connection, so every call does not write the
//! connection's reference count, a line all cores' calls share (`docs/performance.md`,
//! "A call holds its answer, not its connection"). A call past its deadline is failed by
//! the connection's one timer (`pending.rs`), which sends a `cancel` frame; a call whose
//! future is dropped removes itself and sends one. A `goaway` stops new
//! requests while the ones in flight finish, and the connection closes once none is left
//! (so a stopping endpoint's drain ends when its callers are done, not at its deadline);
//! a broken connection fails every call in flight with `Reset`. Idle connections are pinged; one that stays silent is closed.
//! Whoever dialled may be told when a connection stops taking requests (goaway, or
//! closed): [`Connection::connect_watched`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

use super::{Keepalive, TransportError};
use crate::answer::{self, Answer};
use crate::pending::{Pending, Waiter};
use crate::sent::{lost, Abandon, NotSent, Sent};
use crate::tls::ClientTls;
use axle_wire::{ErrorClass, Frame, FrameCodec, Kind, Limits, Metadata, HEADER_LEN};

struct Shared {
    addr: String,
    /// Calls waiting for answers, with their deadlines (`pending.rs`).
    pending: Pending,
    /// No new requests: goaway received, or the connection broke.
    draining: AtomicBool,
    closed: AtomicBool,
    /// Nanoseconds (kernel clock) when a frame last arrived.
    last_read_ns: AtomicU64,
    /// The encodings the peer said it accepts (`accept-encoding` on its responses and
    /// pongs); 0 until it says so, and always from a peer that does not know the tag.
    peer_accepts: AtomicU8,
    /// Wakes the reader and keep-alive tasks when the connection is closed from this side.
    closing: tokio::sync::Notify,
    /// Told once when the connection stops taking requests (goaway or closed), and again
    /// when it closes.
    watch: Option<Arc<tokio::sync::Notify>>,
}

impl Shared {
    /// Removes the waiter of `id`. A connection told to go away is closed once nothing
    /// waits on it any more.
    fn take(&self, id: u64) -> Option<Waiter> {
        let waiter = self.pending.remove(id);
        if self.draining.load(Relaxed) && self.pending.is_empty() {
            self.close_if_drained();
        }
        waiter
    }

    /// A connection told to go away closes once nothing waits on it.
    fn close_if_drained(&self) {
        if self.draining.load(Relaxed) && !self.closed.load(Relaxed) {
            self.fail_all("drained after a goaway");
        }
    }

    /// A goaway arrived: no new requests; closed at once if nothing waits.
    fn go_away(&self) {
        if !self.draining.swap(true, Relaxed) {
            self.tell_watch();
        }
        if self.pending.is_empty() {
            self.fail_all("drained after a goaway");
        }
    }

    fn tell_watch(&self) {
        if let Some(w) = &self.watch {
            w.notify_one();
        }
    }

    fn fail_all(&self, reason: &str) {
        let was_closed = self.closed.swap(true, Relaxed);
        self.draining.store(true, Relaxed);
        self.closing.notify_waiters();
        if !was_closed {
            self.tell_watch();
        }
        for w in self.pending.drain() {
            w.send(Err(TransportError::Reset {
                addr: self.addr.clone(),
                reason: reason.to_string(),
            }));
        }
    }
}

/// A multiplexed connection to one endpoint.
pub struct Connection {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Frame>,
    limits: Limits,
    /// Unique in the process, never reused: names the connection to a call that was sent
    /// on it and holds nothing else of it ([`Sent`]).
    serial: u64,
}

/// A request to send: the frame's flags, metadata and payload, and when to stop waiting
/// for its answer.
pub(crate) struct Request {
    pub(crate) flags: u16,
    pub(crate) meta: Metadata,
    pub(crate) payload: Bytes,
    pub(crate) deadline: Instant,
}

impl Connection {
    /// Dials `addr` (over TLS when `tls` is given) and starts the reader, writer and
    /// keep-alive tasks. TCP connect and handshake together get
    /// [`crate::defaults::CONNECT_TIMEOUT`].
    pub async fn connect(
        addr: &str,
        limits: Limits,
        keepalive: Keepalive,
        tls: Option<&ClientTls>,
    ) -> Result<Arc<Connection>, TransportError> {
        Self::connect_watched(addr, limits, keepalive, tls, None).await
    }

    /// [`Connection::connect`], notifying `watch` when the connection stops taking
    /// requests (a goaway arrived, or it closed), so the dialler can act at once rather
    /// than when the next request finds out.
    pub async fn connect_watched(
        addr: &str,
        limits: Limits,
        keepalive: Keepalive,
        tls: Option<&ClientTls>,
        watch: Option<Arc<tokio::sync::Notify>>,
    ) -> Result<Arc<Connection>, TransportError> {
        let connect_err = |reason: String| TransportError::Connect {
            addr: addr.to_string(),
            reason,
        };
        let dial = async {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| connect_err(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            let Some(tls) = tls else {
                let (read, write) = stream.into_split();
                return Ok(Self::start(addr, read, write, limits, keepalive, watch));
            };
            let name = tls.name_for(addr).map_err(connect_err)?;
            let stream = tls
                .connector
                .connect(name, stream)
                .await
                .map_err(|e| connect_err(format!("TLS handshake: {e}")))?;
            let (read, write) = tokio::io::split(stream);
            Ok(Self::start(addr, read, write, limits, keepalive, watch))
        };
        tokio::time::timeout(crate::defaults::CONNECT_TIMEOUT, dial)
            .await
            .map_err(|_| connect_err("timed out".into()))?
    }

    /// Starts the tasks of a connection over `read` and `write`.
    fn start<R, W>(
        addr: &str,
        read: R,
        write: W,
        limits: Limits,
        keepalive: Keepalive,
        watch: Option<Arc<tokio::sync::Notify>>,
    ) -> Arc<Connection>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::channel(crate::defaults::WRITE_QUEUE);
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            pending: Pending::default(),
            draining: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            last_read_ns: AtomicU64::new(axle_core::now_ns()),
            peer_accepts: AtomicU8::new(0),
            closing: tokio::sync::Notify::new(),
            watch,
        });

        let writer_shared = shared.clone();
        tokio::spawn(async move {
            let failed = writer_shared.clone();
            let writing = super::writer::run(write, rx, limits, move |frame, err| {
                if let Some(w) = failed.take(frame.id) {
                    w.send(Err(TransportError::Frame(err.to_string())));
                }
                None
            });
            // Closed from this side (or drained after a goaway): the socket goes with the
            // writer, rather than when the last handle on the connection is dropped.
            let closing = writer_shared.closing.notified();
            tokio::pin!(closing);
            closing.as_mut().enable();
            let why = if writer_shared.closed.load(Relaxed) {
                "closed".to_string()
            } else {
                tokio::select! {
                    why = writing => why,
                    _ = closing => "closed".to_string(),
                }
            };
            writer_shared.fail_all(&why);
        });

        let reader_shared = shared.clone();
        let pong_tx = tx.clone();
        let max_frame = limits.max_frame;
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read, FrameCodec::new(limits));
            let why = loop {
                // Register for the wake-up before checking the flag, so a close between the
                // two is not missed.
                let closing = reader_shared.closing.notified();
                if reader_shared.closed.load(Relaxed) {
                    break "closed by the caller".to_string();
                }
                let next = tokio::select! {
                    next = frames.next() => next,
                    _ = closing => break "closed by the caller".to_string(),
                };
                match next {
                    None => break "closed by the endpoint".to_string(),
                    Some(Err(e)) => {
                        tracing::warn!(addr = %reader_shared.addr, "closing the connection: {e}");
                        break e.to_string();
                    }
                    Some(Ok(frame)) => {
                        reader_shared
                            .last_read_ns
                            .store(axle_core::now_ns(), Relaxed);
                        match frame.kind {
                            // A pong answers a heartbeat by its id (keep-alive pings use
                            // id 0, which no one waits for).
                            Kind::Response | Kind::Pong => {
                                // A `shutting_down` answer says what a goaway says, even
                                // if the goaway itself is still on its way (or never
                                // comes): no new requests here. Draining before the
                                // answer is delivered: its caller finds it so.
                                if frame.meta.error_class == Some(ErrorClass::ShuttingDown) {
                                    reader_shared.go_away();
                                }
                                if frame.meta.accept_encoding != 0 {
                                    let accepts = frame.meta.accept_encoding;
                                    reader_shared.peer_accepts.store(accepts, Relaxed);
                                }
                                // A payload that does not decompress within the
                                // bounds fails its own call, not the connection.
                                let mut frame = frame;
                                let id = frame.id;
                                let plain = crate::encoding::incoming(&mut frame, max_frame)
                                    .map(|()| frame)
                                    .map_err(|e| TransportError::Frame(e.to_string()));
                                if let Some(w) = reader_shared.take(id) {
                                    w.send(plain);
                                }
                            }
                            Kind::Ping => {
                                let _ = pong_tx.try_send(Frame::bare(Kind::Pong, frame.id));
                            }
                            Kind::Goaway => {
                                tracing::info!(
                                    addr = %reader_shared.addr,
                                    reason = frame.meta.error_message.as_deref().unwrap_or(""),
                                    "goaway: no new requests on this connection"
                                );
                                reader_shared.go_away();
                            }
                            Kind::Request | Kind::Cancel => {}
                        }
                    }
                }
            };
            reader_shared.fail_all(&why);
        });

        let ka_shared = shared.clone();
        let ka_tx = tx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(keepalive.interval);
            tick.tick().await;
            let mut ping_sent_ns: Option<u64> = None;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = ka_shared.closing.notified() => return,
                }
                if ka_shared.closed.load(Relaxed) {
                    return;
                }
                let last = ka_shared.last_read_ns.load(Relaxed);
                let now = axle_core::now_ns();
                match ping_sent_ns {
                    Some(sent) if last < sent => {
                        if now - sent >= keepalive.timeout.as_nanos() as u64 {
                            tracing::warn!(addr = %ka_shared.addr, "no answer to a ping: closing");
                            ka_shared.fail_all("keep-alive timeout");
                            return;
                        }
                    }
                    _ => {
                        ping_sent_ns = None;
                        if now - last >= keepalive.interval.as_nanos() as u64 {
                            if ka_tx.try_send(Frame::bare(Kind::Ping, 0)).is_err() {
                                return;
                            }
                            ping_sent_ns = Some(now);
                        }
                    }
                }
            }
        });

        // The connection's one timer: fails the calls past their deadline.
        let timer_shared = shared.clone();
        let cancel_tx = tx.clone();
        tokio::spawn(async move {
            let shared = timer_shared;
            loop {
                // Registered before the flag is read, so a close between them still wakes.
                let closing = shared.closing.notified();
                tokio::pin!(closing);
                closing.as_mut().enable();
                if shared.closed.load(Relaxed) {
                    return;
                }
                let due = tokio::select! {
                    due = shared.pending.expired() => due,
                    () = closing => return,
                };
                for (id, waiter) in due {
                    waiter.send(Err(TransportError::Timeout));
                    let _ = cancel_tx.try_send(Frame::bare(Kind::Cancel, id));
                }
                if shared.pending.is_empty() {
                    shared.close_if_drained();
                }
            }
        });

        static SERIAL: AtomicU64 = AtomicU64::new(1);
        Arc::new(Connection {
            shared,
            tx,
            limits,
            serial: SERIAL.fetch_add(1, Relaxed),
        })
    }

    /// The connection's serial number, unique in the process.
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The endpoint's address.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// Whether new requests may be sent.
    pub fn usable(&self) -> bool {
        !self.shared.draining.load(Relaxed)
    }

    /// Whether the connection is gone for good.
    pub fn closed(&self) -> bool {
        self.shared.closed.load(Relaxed)
    }

    /// Requests waiting for an answer.
    pub fn in_flight(&self) -> usize {
        self.shared.pending.len()
    }

    /// Sends a request and waits for its response until `deadline`.
    ///
    /// The request is checked and queued when `call` is called; the future only waits
    /// (for room in a full queue, then for the answer), so it holds neither the frame nor
    /// its metadata. A caller's futures nest this one and are moved by copying, so
    /// every byte held here is copied at each level above (`docs/performance.md`, "The
    /// size of a call's future"). Dropped before the answer came, polled or not, it
    /// forgets the request and tells the peer to cancel it.
    pub fn call(
        &self,
        flags: u16,
        meta: Metadata,
        payload: Bytes,
        deadline: Instant,
    ) -> impl Future<Output = Result<Frame, TransportError>> + Send + '_ {
        match self.send(Request {
            flags,
            meta,
            payload,
            deadline,
        }) {
            Ok(sent) => Either::Left(sent.answer(&self.shared.addr, |id| self.abandon(id))),
            Err(e) => Either::Right(NotSent::from(e)),
        }
    }

    /// The checks before a request is sent, then its frame queued for the writer; with
    /// the call's place in the table of answers and where its answer arrives.
    pub(crate) fn send(&self, request: Request) -> Result<Sent, TransportError> {
        let Request {
            flags,
            meta,
            payload,
            deadline,
        } = request;
        if !self.usable() {
            return Err(TransportError::Draining {
                addr: self.shared.addr.clone(),
            });
        }
        // Refuse what the peer would refuse, before anything is queued (the writer checks
        // the exact size, metadata included, and fails the call if it is still over).
        let size = HEADER_LEN + payload.len();
        if size > self.limits.max_frame {
            return Err(TransportError::Frame(format!(
                "a request of {size} bytes exceeds the frame limit of {}",
                self.limits.max_frame
            )));
        }
        let (id, answer) = self.expect_answer(Some(deadline));
        // Waiting from here on keeps a draining connection open for the answer; a goaway
        // that came first means the request is not sent.
        if !self.usable() {
            self.forget(id);
            return Err(TransportError::Draining {
                addr: self.shared.addr.clone(),
            });
        }
        let mut frame = Frame::request(id, meta, payload);
        frame.flags = flags;
        if self.limits.compression.encoding.is_some() {
            let accepts = self.shared.peer_accepts.load(Relaxed);
            crate::encoding::outgoing(&self.limits.compression, &mut frame, accepts);
        }
        // Queued at once unless the writer's queue is full; only then is there a send to
        // wait for.
        let room = match self.tx.try_send(frame) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(frame)) => {
                let tx = self.tx.clone();
                let send: BoxFuture<'static, Result<(), ()>> =
                    Box::pin(async move { tx.send(frame).await.map_err(|_| ()) });
                Some(send)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.forget(id);
                return Err(TransportError::Draining {
                    addr: self.shared.addr.clone(),
                });
            }
        };
        Ok(Sent::new(id, self.serial, answer, room))
    }

    /// A call stopped waiting for its answer: forgets it and, if it was still waiting,
    /// tells the peer to cancel it (a `cancel` frame: the endpoint stops the handler and
    /// frees what it held). The last call to leave a connection told to go away closes
    /// it, which may beat its `cancel` frame out; the endpoint then cancels what the
    /// closed connection left, to the same effect.
    pub(crate) fn abandon(&self, id: u64) {
        if self.forget(id) {
            let _ = self.tx.try_send(Frame::bare(Kind::Cancel, id));
        }
    }

    /// A heartbeat: a ping answered within `timeout`, measured. Works on a draining
    /// connection too (a goaway stops requests, not liveness).
    pub async fn heartbeat(
        &self,
        timeout: std::time::Duration,
    ) -> Result<std::time::Duration, TransportError> {
        if self.closed() {
            return Err(self.lost());
        }
        let (id, rx) = self.expect_answer(None);
        // Forgotten however this ends, the future dropped included: no ping is left
        // waiting in the table.
        let _waiting = Abandon::new(id, |id| {
            self.forget(id);
        });
        let sent = Instant::now();
        if self.tx.send(Frame::bare(Kind::Ping, id)).await.is_err() {
            return Err(self.lost());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(_))) => Ok(sent.elapsed()),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(self.lost()),
            Err(_) => Err(TransportError::Timeout),
        }
    }

    /// A new frame id, and where its answer (response or pong) will arrive.
    /// Past `deadline` the connection's timer fails the call with a timeout and cancels
    /// it at the peer (`pending.rs`).
    fn expect_answer(&self, deadline: Option<Instant>) -> (u64, Answer<'static>) {
        let (tx, rx) = answer::Pool::shared().pair();
        let id = self.shared.pending.insert(tx, deadline);
        (id, rx)
    }

    /// The error of a connection that went away.
    fn lost(&self) -> TransportError {
        lost(&self.shared.addr)
    }

    fn forget(&self, id: u64) -> bool {
        self.shared.take(id).is_some()
    }

    /// Closes the connection: calls in flight fail with `Reset`.
    pub fn close(&self) {
        self.shared.fail_all("closed by the caller");
    }
}

impl Drop for Connection {
    /// The last handle is gone: stop the reader and keep-alive tasks; the writer then sees
    /// its channel close and shuts the socket down.
    fn drop(&mut self) {
        self.shared.fail_all("connection dropped");
    }
}
