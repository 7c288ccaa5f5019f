//! One endpoint's link: a single multiplexed connection, dialled on first use and again
//! after it breaks or is told to go away, with jittered exponential backoff between
//! failed dials so an unreachable endpoint costs callers a fast error, not a connect
//! timeout each, and callers that lost the same endpoint do not re-dial in lockstep.
//!
//! A caller's dial is bounded by its call's deadline ([`EndpointLink::connection_by`]): a
//! connect that would overrun what is left of the budget is cut to it and fails as a
//! timeout, not a connect timeout later. Whoever owns the link may be told when its
//! connection stops taking requests ([`EndpointLink::with_watch`]) and re-dial on its own
//! schedule ([`EndpointLink::redial`]).
//!
//! A call through the link ([`EndpointLink::call`]) holds no handle on its connection
//! while it waits: a clone and a drop of the connection's `Arc` on every call wrote a
//! count every core's calls share (`docs/performance.md`, "A call holds its answer, not its
//! connection"). So the link keeps a connection it replaced while that one still has
//! calls to answer, and a call that stops waiting finds its connection again here.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use futures::future::{BoxFuture, Either};

use super::connection::{Connection, Request};
use super::{Keepalive, TransportError};
use crate::defaults::{RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN};
use crate::sent::{NotSent, Sent};
use crate::tls::ClientTls;
use axle_wire::{Frame, Limits, Metadata};

struct Backoff {
    next_attempt: Option<Instant>,
    delay: Duration,
    last_error: String,
}

/// The link to one endpoint.
pub struct EndpointLink {
    addr: String,
    limits: Limits,
    keepalive: Keepalive,
    /// Dial over TLS with this, when set.
    tls: Option<ClientTls>,
    /// Told when a connection of this link stops taking requests (goaway, closed).
    watch: Option<Arc<tokio::sync::Notify>>,
    current: ArcSwapOption<Connection>,
    /// Connections replaced while they still had calls to answer (told to go away, and a
    /// new one dialled): kept until they close, as they do once their last answer is in,
    /// so that a call that stops waiting can still be cancelled there.
    retired: Mutex<Vec<Arc<Connection>>>,
    /// Single-flight dialling: one caller dials, the others wait for its result.
    dial: tokio::sync::Mutex<()>,
    backoff: Mutex<Backoff>,
}

impl EndpointLink {
    pub fn new(addr: impl Into<String>, limits: Limits, keepalive: Keepalive) -> Self {
        EndpointLink {
            addr: addr.into(),
            limits,
            keepalive,
            tls: None,
            watch: None,
            current: ArcSwapOption::empty(),
            retired: Mutex::new(Vec::new()),
            dial: tokio::sync::Mutex::new(()),
            backoff: Mutex::new(Backoff {
                next_attempt: None,
                delay: RECONNECT_BACKOFF_MIN,
                last_error: String::new(),
            }),
        }
    }

    /// Dials over TLS with `tls` (plain TCP when `None`).
    pub fn with_tls(mut self, tls: Option<ClientTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Notifies `watch` whenever a connection of this link stops taking requests: a
    /// goaway arrived (the endpoint is stopping, or shed the connection), or it closed.
    pub fn with_watch(mut self, watch: Arc<tokio::sync::Notify>) -> Self {
        self.watch = Some(watch);
        self
    }

    /// The endpoint's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The connection, if one was made and is not closed (it may be draining).
    pub fn current(&self) -> Option<Arc<Connection>> {
        self.current.load_full().filter(|c| !c.closed())
    }

    /// Whether a connection was made and has since closed.
    pub fn lost(&self) -> bool {
        self.current.load().as_ref().is_some_and(|c| c.closed())
    }

    /// Whether a connection was made and no longer takes requests (told to go away, or
    /// closed), with no new one made since.
    pub fn away(&self) -> bool {
        self.current.load().as_ref().is_some_and(|c| !c.usable())
    }

    fn live(&self) -> Option<Arc<Connection>> {
        self.current.load_full().filter(|c| c.usable())
    }

    /// Sends a request on the endpoint's connection, dialling one within `deadline` if
    /// there is none (as [`EndpointLink::connection_by`]), and waits for its answer until
    /// `deadline`. [`Connection::call`] otherwise: the request is queued when `call` is
    /// called, and the future dropped before the answer came cancels it at the peer.
    ///
    /// Unlike a call on a connection the caller holds, the future holds no handle on the
    /// connection: only its answer's slot and the connection's serial number, by which
    /// [`EndpointLink::abandon`] finds it again if the call stops waiting.
    pub fn call(
        &self,
        flags: u16,
        meta: Metadata,
        payload: Bytes,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Result<Frame, TransportError>> + Send + '_ {
        match self.send_live(Request {
            flags,
            meta,
            payload,
            deadline,
        }) {
            Ok(Ok(sent)) => Either::Left(self.answer(sent)),
            Ok(Err(e)) => Either::Right(Either::Left(NotSent::from(e))),
            // No usable connection: dial, then send (boxed: a rare path, and its future
            // holds the request through the dial).
            Err(request) => Either::Right(Either::Right(Box::pin(async move {
                let sent = self.connection_by(deadline).await?.send(*request)?;
                self.answer(sent).await
            }) as BoxFuture<'_, _>)),
        }
    }

    /// Waits for a call sent on one of this link's connections; dropped before the
    /// answer, it abandons the call on the connection it was sent on.
    fn answer(
        &self,
        sent: Sent,
    ) -> impl std::future::Future<Output = Result<Frame, TransportError>> + Send + '_ {
        let conn = sent.conn;
        sent.answer(&self.addr, move |id| self.abandon(conn, id))
    }

    /// Queues `request` on the usable connection, if there is one. Given back when there
    /// is none, boxed: only then is it kept in the call's future, through the dial.
    fn send_live(&self, request: Request) -> Result<Result<Sent, TransportError>, Box<Request>> {
        match self.current.load().as_ref() {
            Some(c) if c.usable() => Ok(c.send(request)),
            _ => Err(Box::new(request)),
        }
    }

    /// A call sent on the connection numbered `conn` stopped waiting: forgets it there and
    /// cancels it at the peer ([`Connection::abandon`]). A connection no longer kept has
    /// closed, and its calls with it: nothing to do.
    fn abandon(&self, conn: u64, id: u64) {
        if let Some(c) = self.current.load().as_ref().filter(|c| c.serial() == conn) {
            return c.abandon(id);
        }
        let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = retired.iter().find(|c| c.serial() == conn) {
            c.abandon(id);
        }
    }

    /// `next` takes the place of the current connection, which is kept while it may still
    /// answer calls; those kept that have closed since are let go.
    fn replace(&self, next: Arc<Connection>) {
        let previous = self.current.swap(Some(next));
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.retain(|c| !c.closed());
        retired.extend(previous.filter(|c| !c.closed()));
    }

    /// A usable connection, dialling if there is none (unless backing off).
    pub async fn connection(&self) -> Result<Arc<Connection>, TransportError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        self.dial(false).await
    }

    /// [`EndpointLink::connection`] by `deadline`: waiting for another caller's dial and
    /// dialling both end there, with [`TransportError::Timeout`]. A dial cut short this way
    /// says nothing about the endpoint, so it does not count towards the backoff.
    pub async fn connection_by(
        &self,
        deadline: Instant,
    ) -> Result<Arc<Connection>, TransportError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        if Instant::now() >= deadline {
            return Err(TransportError::Timeout);
        }
        // Boxed: only a call that finds no connection dials, and the dial's future (TCP,
        // TLS) would otherwise make up most of every call's future, which is moved by
        // copying.
        match Box::pin(tokio::time::timeout_at(deadline.into(), self.dial(false))).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::Timeout),
        }
    }

    /// Dials now, whatever the backoff says, unless a usable connection is there: for the
    /// owner's own re-dial schedule (a health monitor bringing a stopped endpoint back).
    /// The result counts towards the backoff callers see.
    pub async fn redial(&self) -> Result<Arc<Connection>, TransportError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        self.dial(true).await
    }

    /// The single-flight dial; `now`: ignore the backoff.
    async fn dial(&self, now: bool) -> Result<Arc<Connection>, TransportError> {
        let _dialling = self.dial.lock().await;
        if let Some(c) = self.live() {
            return Ok(c);
        }
        if !now {
            let b = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = b.next_attempt {
                if Instant::now() < at {
                    return Err(TransportError::Connect {
                        addr: self.addr.clone(),
                        reason: format!(
                            "{} (next attempt in {:?})",
                            b.last_error,
                            at - Instant::now()
                        ),
                    });
                }
            }
        }
        let made = Connection::connect_watched(
            &self.addr,
            self.limits,
            self.keepalive,
            self.tls.as_ref(),
            self.watch.clone(),
        )
        .await;
        let mut b = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
        match made {
            Ok(c) => {
                b.next_attempt = None;
                b.delay = RECONNECT_BACKOFF_MIN;
                self.replace(c.clone());
                Ok(c)
            }
            Err(e) => {
                b.next_attempt = Some(Instant::now() + jittered(b.delay));
                b.delay = (b.delay * 2).min(RECONNECT_BACKOFF_MAX);
                b.last_error = match &e {
                    TransportError::Connect { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                Err(e)
            }
        }
    }
}

/// `delay` ±50%, uniformly: callers that lost the same endpoint at the same moment spread
/// their re-dials. (A small generator of its own: a dial is rare, and the transport needs
/// no random crate for it.)
pub fn jittered(delay: Duration) -> Duration {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed) ^ axle_core::now_ns();
    // splitmix64
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
    delay.mul_f64(0.5 + unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn failed(r: Result<Arc<Connection>, TransportError>) -> TransportError {
        match r {
            Ok(_) => panic!("connected"),
            Err(e) => e,
        }
    }

    #[test]
    fn jitter_spreads_within_half_either_side() {
        let base = Duration::from_millis(100);
        let d: Vec<Duration> = (0..1000).map(|_| jittered(base)).collect();
        assert!(d.iter().all(|d| *d >= base / 2 && *d <= base * 3 / 2));
        let below = d.iter().filter(|d| **d < base).count();
        assert!(
            (300..=700).contains(&below),
            "{below} of 1000 below the base"
        );
    }

    /// A listener whose accept queue is full: further SYNs are dropped, so a connect to it
    /// hangs (the kernel retries the SYN after a second) without leaving loopback.
    async fn hanging_listener() -> (tokio::net::TcpListener, Vec<tokio::net::TcpStream>) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut filled = Vec::new();
        // Fill the queue: connects complete until it is full; the first that does not
        // complete at once shows it is.
        for _ in 0..16 {
            let connect = tokio::net::TcpStream::connect(addr);
            match tokio::time::timeout(Duration::from_millis(300), connect).await {
                Ok(Ok(s)) => filled.push(s),
                _ => return (listener, filled),
            }
        }
        panic!("the accept queue never filled");
    }

    #[tokio::test]
    async fn a_connect_is_cut_to_the_deadline_and_costs_no_backoff() {
        let (listener, _filled) = hanging_listener().await;
        let addr = listener.local_addr().unwrap().to_string();
        let link = EndpointLink::new(&addr, Limits::default(), Keepalive::default());
        let t0 = Instant::now();
        let err = failed(
            link.connection_by(Instant::now() + Duration::from_millis(50))
                .await,
        );
        assert_eq!(err, TransportError::Timeout, "cut by the deadline");
        assert!(
            t0.elapsed() < crate::defaults::CONNECT_TIMEOUT,
            "not the connect timeout: {:?}",
            t0.elapsed()
        );
        assert!(
            link.backoff.lock().unwrap().next_attempt.is_none(),
            "a cut dial is not a failed one"
        );
        // A deadline already gone does not dial at all.
        let gone = failed(link.connection_by(Instant::now()).await);
        assert_eq!(gone, TransportError::Timeout);
    }

    #[tokio::test]
    async fn a_refused_dial_backs_off_but_redial_goes_at_once() {
        // A port nothing listens on: bound, then closed.
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().to_string()
        };
        let link = EndpointLink::new(&addr, Limits::default(), Keepalive::default());
        let first = failed(link.connection().await);
        assert!(matches!(first, TransportError::Connect { .. }), "{first}");
        let fast = failed(link.connection().await);
        assert!(fast.to_string().contains("next attempt"), "{fast}");
        // The owner's re-dial ignores the backoff: it reaches the endpoint as soon as it
        // listens again.
        let listener = TcpListener::bind(&addr).await.unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        let conn = link.redial().await.expect("dialled at once");
        assert!(conn.usable());
        assert!(!link.away());
        accept.await.unwrap().unwrap();
        assert!(link.connection().await.is_ok(), "the backoff is over");
    }

    #[tokio::test]
    async fn a_goaway_tells_the_watch_and_the_link_is_away_until_redialled() {
        use futures::SinkExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // An endpoint that says goaway on its first connection and nothing on the next.
        let provider = tokio::spawn(async move {
            let (first, _) = listener.accept().await.unwrap();
            let mut out = tokio_util::codec::FramedWrite::new(
                first,
                axle_wire::FrameCodec::new(Limits::default()),
            );
            out.send(axle_wire::Frame::goaway("stopping"))
                .await
                .unwrap();
            let (second, _) = listener.accept().await.unwrap();
            (out, second)
        });
        let watch = Arc::new(tokio::sync::Notify::new());
        let link = EndpointLink::new(&addr, Limits::default(), Keepalive::default())
            .with_watch(watch.clone());
        let first = link.connection().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), watch.notified())
            .await
            .expect("the watch was told of the goaway");
        assert!(!first.usable() && link.away());
        let second = link.redial().await.unwrap();
        assert!(second.usable() && !link.away());
        let _held = provider.await.unwrap();
    }

    #[tokio::test]
    async fn a_connection_told_to_go_away_closes_once_its_last_answer_is_in() {
        use futures::{SinkExt, StreamExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // A stopping endpoint: goaway while a request is in flight, then its answer; then
        // it waits for the caller to close.
        let provider = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut frames = tokio_util::codec::Framed::new(
                stream,
                axle_wire::FrameCodec::new(Limits::default()),
            );
            let request = goaway_after_a_request(&mut frames).await;
            let answer = axle_wire::Frame::response(request.id, None, request.payload);
            frames.send(answer).await.unwrap();
            // The caller closes: the stream ends (no more frames, whatever came before).
            while let Some(Ok(_)) = frames.next().await {}
        });
        let link = EndpointLink::new(&addr, Limits::default(), Keepalive::default());
        let conn = link.connection().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let meta = axle_wire::Metadata::default();
        let answer = conn
            .call(0, meta, bytes::Bytes::from_static(b"hi"), deadline)
            .await
            .unwrap();
        assert_eq!(answer.payload, bytes::Bytes::from_static(b"hi"), "answered");
        tokio::time::timeout(Duration::from_secs(10), provider)
            .await
            .expect("the caller closed the drained connection")
            .unwrap();
        assert!(conn.closed() && link.away());
    }

    type Frames = tokio_util::codec::Framed<tokio::net::TcpStream, axle_wire::FrameCodec>;

    /// The endpoint's side of a stopping connection: reads until `n` requests came, then
    /// says goaway. The requests.
    async fn goaway_after(frames: &mut Frames, n: usize) -> Vec<axle_wire::Frame> {
        use futures::{SinkExt, StreamExt};
        let mut requests = Vec::new();
        while requests.len() < n {
            match frames.next().await.unwrap().unwrap() {
                f if f.kind == axle_wire::Kind::Request => requests.push(f),
                _ => {}
            }
        }
        frames
            .send(axle_wire::Frame::goaway("stopping"))
            .await
            .unwrap();
        requests
    }

    async fn goaway_after_a_request(frames: &mut Frames) -> axle_wire::Frame {
        goaway_after(frames, 1).await.remove(0)
    }

    /// The calls of [`calls_on_a_replaced_connection`], each in a task of its own.
    type Calls = Vec<tokio::task::JoinHandle<Result<axle_wire::Frame, TransportError>>>;

    /// A link whose connection took a request of each of `payloads`, was told to go away,
    /// and was replaced by a new one. With the calls (in the order of `payloads`), the
    /// endpoint's end of the old connection and the requests as they came on it, and the
    /// new connection.
    async fn calls_on_a_replaced_connection(
        payloads: &[&'static [u8]],
        deadline: Duration,
    ) -> (
        Arc<EndpointLink>,
        Calls,
        Frames,
        Vec<axle_wire::Frame>,
        tokio::net::TcpStream,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let n = payloads.len();
        let provider = tokio::spawn(async move {
            let (first, _) = listener.accept().await.unwrap();
            let codec = axle_wire::FrameCodec::new(Limits::default());
            let mut frames = tokio_util::codec::Framed::new(first, codec);
            let requests = goaway_after(&mut frames, n).await;
            let (second, _) = listener.accept().await.unwrap();
            (frames, requests, second)
        });
        let watch = Arc::new(tokio::sync::Notify::new());
        let link = Arc::new(
            EndpointLink::new(&addr, Limits::default(), Keepalive::default())
                .with_watch(watch.clone()),
        );
        let deadline = Instant::now() + deadline;
        let calls = payloads
            .iter()
            .map(|payload| {
                let link = link.clone();
                let payload = Bytes::from_static(payload);
                tokio::spawn(async move {
                    let meta = axle_wire::Metadata::default();
                    link.call(0, meta, payload, deadline).await
                })
            })
            .collect();
        tokio::time::timeout(Duration::from_secs(30), watch.notified())
            .await
            .expect("the goaway came");
        let next = link.redial().await.expect("a new connection");
        assert!(next.usable() && !link.away(), "the link moved on");
        let (frames, requests, second) = provider.await.unwrap();
        (link, calls, frames, requests, second)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_still_gets_its_answer_after_the_link_replaced_its_connection() {
        use futures::{SinkExt, StreamExt};
        let (_link, calls, mut frames, requests, _second) =
            calls_on_a_replaced_connection(&[b"hi"], Duration::from_secs(30)).await;
        // The call holds nothing of its connection: the link kept the one it replaced.
        let request = &requests[0];
        let answer = axle_wire::Frame::response(request.id, None, request.payload.clone());
        frames.send(answer).await.unwrap();
        let [call] = <[_; 1]>::try_from(calls).unwrap();
        let got = call.await.unwrap().expect("answered on the old connection");
        assert_eq!(got.payload, Bytes::from_static(b"hi"));
        // With its last answer in, the old connection closes.
        let ended = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(Ok(_)) = frames.next().await {}
        });
        ended.await.expect("the drained connection was closed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_dropped_after_the_link_replaced_its_connection_is_cancelled_there() {
        use futures::{SinkExt, StreamExt};
        // Two calls: the one still waiting keeps the old connection open, so the dropped
        // one's cancel is a frame on it (the last call of a drained connection closes it
        // instead, which cancels at the endpoint too). A deadline far beyond the wait
        // below: the cancel must come from the drop, not from the connection's timer.
        let (_link, calls, mut frames, requests, _second) =
            calls_on_a_replaced_connection(&[b"dropped", b"kept"], Duration::from_secs(600)).await;
        let [dropped, kept] = <[_; 2]>::try_from(calls).unwrap();
        let id_of = |payload: &[u8]| requests.iter().find(|r| r.payload == payload).unwrap().id;
        dropped.abort();
        let cancelled = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match frames.next().await {
                    Some(Ok(f)) if f.kind == axle_wire::Kind::Cancel => break f.id,
                    Some(Ok(_)) => {}
                    other => panic!("the connection ended without a cancel: {other:?}"),
                }
            }
        });
        let id = cancelled
            .await
            .expect("a cancel frame on the old connection");
        assert_eq!(id, id_of(b"dropped"));
        assert!(dropped.await.unwrap_err().is_cancelled());
        // The other call is still answered there.
        let answer = axle_wire::Frame::response(id_of(b"kept"), None, Bytes::from_static(b"ok"));
        frames.send(answer).await.unwrap();
        let got = kept.await.unwrap().expect("answered on the old connection");
        assert_eq!(got.payload, Bytes::from_static(b"ok"));
    }
}
