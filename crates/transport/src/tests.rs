//! Connection behaviour on loopback, in process: out-of-order answers, cancel, goaway,
//! keep-alive, and what a dropped connection leaves behind.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::connection::Connection;
use super::serve::{self, Dispatch, Peer};
use super::{Keepalive, TransportError};
use axle_wire::{ErrorClass, Frame, Limits, Metadata};

const STOPPING: u8 = 255;

/// Echoes after sleeping the number of milliseconds in the payload's first byte; counts
/// requests that were dropped (cancelled) before finishing. A first byte of [`STOPPING`]
/// is answered `shutting_down`.
#[derive(Default)]
struct SlowEcho {
    cancelled: AtomicUsize,
}

struct CountDrop<'a>(&'a AtomicUsize, bool);

impl Drop for CountDrop<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, SeqCst);
        }
    }
}

impl Dispatch for SlowEcho {
    fn dispatch(
        self: Arc<Self>,
        request: Frame,
        _peer: &Arc<Peer>,
        _arrived: std::time::Instant,
    ) -> BoxFuture<'static, Frame> {
        Box::pin(async move {
            if request.payload.first() == Some(&STOPPING) {
                return Frame::error(request.id, ErrorClass::ShuttingDown, "stopping");
            }
            let mut guard = CountDrop(&self.cancelled, false);
            let ms = request.payload.first().copied().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
            guard.1 = true;
            Frame::response(request.id, None, request.payload)
        })
    }
}

async fn server(dispatch: Arc<SlowEcho>) -> (SocketAddr, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = watch::channel(false);
    tokio::spawn(serve::accept(listener, dispatch, Limits::default(), rx));
    (addr, tx)
}

/// A connection to `addr` with the default limits and keep-alive.
async fn dial(addr: SocketAddr) -> Arc<Connection> {
    Connection::connect(
        &addr.to_string(),
        Limits::default(),
        Keepalive::default(),
        None,
    )
    .await
    .unwrap()
}

fn meta() -> Metadata {
    Metadata {
        service: Some("s".into()),
        method: Some("m".into()),
        ..Metadata::default()
    }
}

fn soon(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

#[tokio::test]
async fn answers_come_back_out_of_order_matched_by_id() {
    let (addr, _closing) = server(Arc::default()).await;
    let conn = dial(addr).await;
    // 50 ms, then 1 ms: the second answer overtakes the first.
    let slow = conn.call(0, meta(), Bytes::from_static(&[50, 1]), soon(5000));
    let fast = conn.call(0, meta(), Bytes::from_static(&[1, 2]), soon(5000));
    let (first_done, order) = tokio::select! {
        r = fast => (r.unwrap(), "fast"),
        r = slow => (r.unwrap(), "slow"),
    };
    assert_eq!(order, "fast");
    assert_eq!(&first_done.payload[..], &[1, 2]);
}

#[tokio::test]
async fn a_caller_that_gives_up_cancels_the_request() {
    let echo = Arc::new(SlowEcho::default());
    let (addr, _closing) = server(echo.clone()).await;
    let conn = dial(addr).await;
    let err = conn
        .call(0, meta(), Bytes::from_static(&[200]), soon(30))
        .await
        .unwrap_err();
    assert_eq!(err, TransportError::Timeout);
    assert_eq!(conn.in_flight(), 0, "the waiter is gone");
    // The provider aborts the handler when the cancel frame arrives.
    let until = Instant::now() + Duration::from_secs(5);
    while echo.cancelled.load(SeqCst) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(echo.cancelled.load(SeqCst), 1);
}

#[tokio::test]
async fn a_short_deadline_times_out_while_a_longer_call_waits_on_the_connection() {
    let echo = Arc::new(SlowEcho::default());
    let (addr, _closing) = server(echo.clone()).await;
    let conn = dial(addr).await;
    // The connection's timer is set for the first call's deadline, 5 s away; the second
    // call's, 30 ms away, must move it earlier.
    let long = conn.call(0, meta(), Bytes::from_static(&[200]), soon(5000));
    let short = conn.call(0, meta(), Bytes::from_static(&[200]), soon(30));
    tokio::pin!(long);
    let first = tokio::select! {
        r = short => r.map(|_| "short answered"),
        r = &mut long => r.map(|_| "long answered"),
    };
    assert_eq!(first, Err(TransportError::Timeout));
    assert_eq!(conn.in_flight(), 1, "the long call still waits");
    assert_eq!(
        &long.await.expect("the long call is answered").payload[..],
        &[200]
    );
    let until = Instant::now() + Duration::from_secs(5);
    while echo.cancelled.load(SeqCst) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        echo.cancelled.load(SeqCst),
        1,
        "only the short call was cancelled"
    );
}

#[tokio::test]
async fn goaway_stops_new_requests_while_those_in_flight_finish() {
    let (addr, closing) = server(Arc::default()).await;
    let conn = dial(addr).await;
    let in_flight = conn.call(0, meta(), Bytes::from_static(&[100]), soon(5000));
    tokio::pin!(in_flight);
    // Let the request leave, then close the provider.
    tokio::select! {
        _ = &mut in_flight => panic!("answered too early"),
        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
    }
    closing.send(true).unwrap();
    let answer = in_flight.await.unwrap();
    assert_eq!(
        &answer.payload[..],
        &[100],
        "the request in flight finished"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while conn.usable() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!conn.usable());
    let refused = conn
        .call(0, meta(), Bytes::from_static(&[0]), soon(1000))
        .await;
    assert!(
        matches!(refused, Err(TransportError::Draining { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_shutting_down_answer_drains_the_connection_like_a_goaway() {
    let (addr, _closing) = server(Arc::default()).await;
    let conn = dial(addr).await;
    let answer = conn
        .call(0, meta(), Bytes::from_static(&[STOPPING]), soon(5000))
        .await
        .unwrap();
    assert_eq!(answer.meta.error_class, Some(ErrorClass::ShuttingDown));
    // Its caller already finds the connection draining: a re-dial makes a new one.
    assert!(!conn.usable());
    let refused = conn
        .call(0, meta(), Bytes::from_static(&[0]), soon(1000))
        .await;
    assert!(
        matches!(refused, Err(TransportError::Draining { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_silent_peer_is_declared_dead_by_keep_alive() {
    // Accepts and reads, never answers anything (not even pings).
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        use tokio::io::AsyncReadExt;
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    });
    let keepalive = Keepalive {
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(40),
    };
    let conn = Connection::connect(&addr.to_string(), Limits::default(), keepalive, None)
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !conn.closed() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(conn.closed(), "no pong: the connection is closed");
}

#[tokio::test]
async fn a_peer_that_answers_pings_stays_alive_and_usable() {
    let (addr, _closing) = server(Arc::default()).await;
    let keepalive = Keepalive {
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
    };
    let conn = Connection::connect(&addr.to_string(), Limits::default(), keepalive, None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!conn.closed());
    let answer = conn
        .call(0, meta(), Bytes::from_static(&[0, 9]), soon(5000))
        .await
        .unwrap();
    assert_eq!(&answer.payload[..], &[0, 9]);
}
