//! The provider's connection limits, over real loopback sockets: idle and stalled
//! connections closed, per-connection caps answered `overloaded`, handlers cancelled when
//! their caller leaves (unless they opt out), the cap making room by closing idle ones.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::{accept_until, Connections, Dispatch, Peer, ServeLimits};
use crate::connection::Connection;
use crate::Keepalive;
use axle_wire::{ErrorClass, Frame, Limits, Metadata};

mod compression;

/// Sleeps the payload's first byte in ms, then echoes; counts handlers dropped before
/// they finished. A request whose method is `stay` keeps running when its caller leaves.
#[derive(Default)]
struct Sleeper {
    cancelled: AtomicUsize,
    finished: AtomicUsize,
}

struct Watch<'a>(&'a Sleeper, bool);

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let counter = if self.1 {
            &self.0.finished
        } else {
            &self.0.cancelled
        };
        counter.fetch_add(1, SeqCst);
    }
}

impl Dispatch for Sleeper {
    fn dispatch(
        self: Arc<Self>,
        request: Frame,
        _peer: &Arc<Peer>,
        _arrived: std::time::Instant,
    ) -> BoxFuture<'static, Frame> {
        Box::pin(async move {
            let mut watch = Watch(&self, false);
            let ms = request.payload.first().copied().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
            watch.1 = true;
            Frame::response(request.id, None, request.payload)
        })
    }

    fn keeps_running(&self, request: &Frame) -> bool {
        request.meta.method.as_deref() == Some("stay")
    }
}

async fn serve(
    limits: ServeLimits,
    dispatch: Arc<Sleeper>,
) -> (SocketAddr, Arc<Connections>, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Connections::new();
    let (tx, rx) = watch::channel(false);
    tokio::spawn(accept_until(
        listener,
        dispatch,
        limits,
        None,
        open.clone(),
        rx.clone(),
        rx,
    ));
    (addr, open, tx)
}

async fn connect(addr: SocketAddr) -> Arc<Connection> {
    Connection::connect(
        &addr.to_string(),
        Limits::default(),
        Keepalive::default(),
        None,
    )
    .await
    .unwrap()
}

fn meta(method: &str) -> Metadata {
    Metadata {
        service: Some("s".into()),
        method: Some(method.into()),
        ..Metadata::default()
    }
}

/// Waits (bounded) for `done`.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "{what}: never happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Reads until the peer closes; `true` if it did within the bound.
async fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    let until = Duration::from_secs(10);
    loop {
        match tokio::time::timeout(until, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_a_stalled_frame_too() {
    let limits = ServeLimits {
        idle_timeout: Duration::from_millis(200),
        frame_timeout: Duration::from_millis(100),
        ..ServeLimits::default()
    };
    let (addr, open, _closing) = serve(limits, Arc::default()).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    // The first bytes of a header, and no more.
    stalled.write_all(&axle_wire::MAGIC).await.unwrap();
    assert!(
        closed_by_peer(&mut stalled).await,
        "the stalled frame's connection closed"
    );
    assert!(
        closed_by_peer(&mut idle).await,
        "the idle connection closed"
    );
    eventually("both gone from the registry", || open.open() == 0).await;
}

#[tokio::test]
async fn past_a_connections_request_cap_callers_are_told_overloaded() {
    let limits = ServeLimits {
        max_requests: 2,
        ..ServeLimits::default()
    };
    let (addr, _open, _closing) = serve(limits, Arc::default()).await;
    let conn = connect(addr).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let slow = |conn: Arc<Connection>| async move {
        conn.call(
            0,
            meta("m"),
            Bytes::from_static(&[200]),
            deadline.into_std(),
        )
        .await
    };
    let a = tokio::spawn(slow(conn.clone()));
    let b = tokio::spawn(slow(conn.clone()));
    eventually("two in flight", || conn.in_flight() == 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let third = conn
        .call(0, meta("m"), Bytes::from_static(&[0]), deadline.into_std())
        .await
        .unwrap();
    assert_eq!(third.meta.error_class, Some(ErrorClass::Overloaded));
    assert!(a.await.unwrap().is_ok() && b.await.unwrap().is_ok());
}

#[tokio::test]
async fn handlers_are_cancelled_when_their_caller_leaves_unless_they_opt_out() {
    let sleeper = Arc::new(Sleeper::default());
    let (addr, _open, _closing) = serve(ServeLimits::default(), sleeper.clone()).await;
    // Two requests written on a raw socket, which then goes away.
    let mut bytes = bytes::BytesMut::new();
    for (id, method) in [(1, "m"), (2, "stay")] {
        let frame = Frame::request(id, meta(method), Bytes::from_static(&[150]));
        axle_wire::codec_encode(&Limits::default(), &frame, &mut bytes).unwrap();
    }
    let mut caller = TcpStream::connect(addr).await.unwrap();
    caller.write_all(&bytes).await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    drop(caller);
    eventually("the leaving caller's handler cancelled", || {
        sleeper.cancelled.load(SeqCst) == 1
    })
    .await;
    eventually("the opted-out handler finished", || {
        sleeper.finished.load(SeqCst) == 1
    })
    .await;
}

#[tokio::test]
async fn at_the_connection_cap_an_idle_connection_makes_room() {
    let limits = ServeLimits {
        max_connections: 4,
        ..ServeLimits::default()
    };
    let (addr, open, _closing) = serve(limits, Arc::default()).await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    // A caller that comes after twenty idle connections is served.
    let conn = connect(addr).await;
    let reply = conn
        .call(
            0,
            meta("m"),
            Bytes::from_static(&[0]),
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(reply.meta.error_class, None);
    eventually("the registry held to the cap", || open.open() <= 4).await;
    let (refused, evicted) = open.refused_and_evicted();
    assert_eq!(refused, 0);
    assert!(evicted >= 16, "{evicted}");
}
