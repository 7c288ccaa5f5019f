//! The provider's side of one connection: read frames, run each request as its own task
//! (responses go out in whatever order they finish), answer pings, honour cancels.
//!
//! A malformed frame closes this connection only, with the reason logged; a peer speaking
//! another protocol version is first told why in a `goaway` frame.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_util::codec::FramedRead;

use crate::tls::ServerTls;
use axle_wire::{ErrorClass, Frame, FrameCodec, Kind, Limits, WireError};

/// What runs a request: the server's pipeline. Returns the response frame.
pub trait Dispatch: Send + Sync + 'static {
    fn dispatch(self: Arc<Self>, request: Frame, peer: &Arc<Peer>) -> BoxFuture<'static, Frame>;
}

/// Who is on the other end of a connection, as far as the transport can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The DNS names of the certificate the peer presented and the provider verified
    /// (mTLS); empty over plain TCP or without client authentication.
    pub names: Vec<String>,
}

impl Peer {
    /// A peer known by its address only.
    pub fn plain(addr: SocketAddr) -> Arc<Peer> {
        Arc::new(Peer {
            addr,
            names: Vec::new(),
        })
    }

    /// Its verified identity: the first name of its certificate.
    pub fn identity(&self) -> Option<&str> {
        self.names.first().map(String::as_str)
    }
}

/// Accepts connections on `listener` and serves each, until `closing` turns true (or its
/// sender is gone): then it stops accepting, and the open connections send their goaway
/// and drain on their own.
pub async fn accept<D: Dispatch>(
    listener: TcpListener,
    dispatch: Arc<D>,
    limits: Limits,
    closing: watch::Receiver<bool>,
) {
    accept_until(listener, dispatch, limits, None, closing.clone(), closing).await
}

/// [`accept`], but accepting goes on until `stop` turns true, while `closing` tells the
/// connections to send their goaway. A stopping server keeps accepting through its drain:
/// a caller that dialled before it heard of the stop then gets a goaway and
/// `shutting_down` answers (safe to fail over from) instead of a reset from a closed
/// listener's backlog after it already sent requests.
pub async fn accept_until<D: Dispatch>(
    listener: TcpListener,
    dispatch: Arc<D>,
    limits: Limits,
    tls: Option<ServerTls>,
    closing: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
        };
        let dispatch = dispatch.clone();
        let closing = closing.clone();
        match &tls {
            None => {
                tokio::spawn(connection(stream, peer, dispatch, limits, closing));
            }
            Some(tls) => {
                let acceptor = tls.acceptor.clone();
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    let handshake = tokio::time::timeout(
                        crate::defaults::HANDSHAKE_TIMEOUT,
                        acceptor.accept(stream),
                    );
                    let stream = match handshake.await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                    };
                    let names = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(crate::tls::names_of)
                        .unwrap_or_default();
                    let peer = Arc::new(Peer { addr: peer, names });
                    let (read, write) = tokio::io::split(stream);
                    serve(read, write, peer, dispatch, limits, closing).await
                });
            }
        }
    }
}

/// Serves one accepted connection until the peer leaves, the connection breaks, or the
/// server is closed and the requests in flight have been answered.
pub async fn connection<D: Dispatch>(
    stream: TcpStream,
    peer: SocketAddr,
    dispatch: Arc<D>,
    limits: Limits,
    closing: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    serve(read, write, Peer::plain(peer), dispatch, limits, closing).await
}

/// Serves one connection's halves (plain TCP or TLS).
async fn serve<D, R, W>(
    read: R,
    write: W,
    peer: Arc<Peer>,
    dispatch: Arc<D>,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
) where
    D: Dispatch,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (tx, rx) = mpsc::channel::<Frame>(crate::defaults::WRITE_QUEUE);
    let writer = tokio::spawn(super::writer::run(write, rx, limits, |frame, err| {
        // A response over the limit becomes an error the caller can read.
        Some(Frame::error(
            frame.id,
            ErrorClass::Internal,
            format!("the response cannot be sent: {err}"),
        ))
    }));
    let in_flight: Arc<Mutex<HashMap<u64, AbortHandle>>> = Arc::default();
    let mut frames = FramedRead::new(read, FrameCodec::new(limits));
    let mut goaway_sent = false;
    if *closing.borrow() {
        let _ = tx.send(Frame::goaway("shutting down")).await;
        goaway_sent = true;
    }
    loop {
        let next = tokio::select! {
            next = frames.next() => next,
            changed = closing.changed(), if !goaway_sent => {
                if changed.is_ok() && *closing.borrow() {
                    let _ = tx.send(Frame::goaway("shutting down")).await;
                    goaway_sent = true;
                }
                continue;
            }
        };
        let frame = match next {
            None => break,
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::warn!(peer = %peer.addr, "closing the connection: {e}");
                if let WireError::Version(_) = e {
                    let _ = tx.send(Frame::goaway(e.to_string())).await;
                }
                break;
            }
        };
        match frame.kind {
            Kind::Request => {
                let id = frame.id;
                let mut response = dispatch.clone().dispatch(frame, &peer);
                // Most requests finish on their first poll (echo, a cache hit, a refusal):
                // answer those inline and spawn a task only for the ones that wait.
                if let std::task::Poll::Ready(r) = futures::poll!(response.as_mut()) {
                    let _ = tx.send(r).await;
                    continue;
                }
                let tx = tx.clone();
                let map = in_flight.clone();
                // Hold the map while spawning, so the task's own removal comes after the
                // insertion and no finished request is left behind in it.
                let mut tasks = in_flight.lock().unwrap_or_else(|e| e.into_inner());
                let task = tokio::spawn(async move {
                    let response = response.await;
                    map.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    let _ = tx.send(response).await;
                });
                tasks.insert(id, task.abort_handle());
            }
            Kind::Cancel => {
                let handle = in_flight
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&frame.id);
                if let Some(h) = handle {
                    h.abort();
                }
            }
            Kind::Ping => {
                let _ = tx.send(Frame::bare(Kind::Pong, frame.id)).await;
            }
            Kind::Pong | Kind::Response | Kind::Goaway => {}
        }
    }
    // Let the requests in flight finish and their responses go out, then close.
    drop(tx);
    let _ = writer.await;
}
