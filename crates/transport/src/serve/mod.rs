//! The provider's side of the transport: accept connections under a cap (`registry.rs`),
//! and serve each (`conn.rs`): read frames, run each request as its own task (responses
//! go out in whatever order they finish), answer pings, honour cancels, close what idles
//! or stalls.
//!
//! A malformed frame closes its own connection only, with the reason logged; a peer
//! speaking another protocol version is first told why in a `goaway` frame.

mod conn;
mod registry;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::defaults;
use crate::tls::ServerTls;
use axle_wire::{Frame, Limits};

pub use registry::{ConnState, Connections};

/// What runs a request: the server's pipeline. Returns the response frame.
pub trait Dispatch: Send + Sync + 'static {
    /// `arrived`: when the transport read the request's frame. It is the connection's one
    /// clock reading for that frame (its last activity too), so a pipeline that needs the
    /// time the request came (its deadline, a limiter's clock) reads no clock for it.
    fn dispatch(
        self: Arc<Self>,
        request: Frame,
        peer: &Arc<Peer>,
        arrived: std::time::Instant,
    ) -> BoxFuture<'static, Frame>;

    /// Whether `request`'s handler keeps running when its caller's connection closes
    /// (default: no, it is cancelled: nobody is left to read its answer).
    fn keeps_running(&self, _request: &Frame) -> bool {
        false
    }
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

/// What a provider allows each connection, and how many it holds.
#[derive(Clone, Copy, Debug)]
pub struct ServeLimits {
    /// Frame and metadata sizes.
    pub frame: Limits,
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub frame_timeout: Duration,
    /// Requests in flight per connection.
    pub max_requests: usize,
    /// Bytes of request payloads in flight per connection.
    pub max_buffered_bytes: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            frame: Limits::default(),
            max_connections: defaults::MAX_CONNECTIONS,
            idle_timeout: defaults::IDLE_TIMEOUT,
            frame_timeout: defaults::FRAME_TIMEOUT,
            max_requests: defaults::MAX_REQUESTS_PER_CONNECTION,
            max_buffered_bytes: defaults::MAX_BUFFERED_BYTES,
        }
    }
}

/// Where a server's connections come from: its own TCP listener, or an accept loop that
/// hands it the connections meant for it (the admin endpoint reads the first byte of each
/// and keeps the HTTP ones: one port for `axle stats` and for curl).
pub trait Incoming: Send + 'static {
    /// The next connection and who it is from.
    fn next(
        &mut self,
    ) -> impl std::future::Future<Output = std::io::Result<(TcpStream, SocketAddr)>> + Send;
}

impl Incoming for TcpListener {
    async fn next(&mut self) -> std::io::Result<(TcpStream, SocketAddr)> {
        self.accept().await
    }
}

/// Connections handed over by another accept loop. Once it is gone no more come: the
/// server waits for its stop like one whose listener went quiet.
impl Incoming for tokio::sync::mpsc::Receiver<(TcpStream, SocketAddr)> {
    async fn next(&mut self) -> std::io::Result<(TcpStream, SocketAddr)> {
        match self.recv().await {
            Some(handed) => Ok(handed),
            None => std::future::pending().await,
        }
    }
}

/// Accepts connections on `listener` and serves each with the default limits and frame
/// `limits`, until `closing` turns true (or its sender is gone): then it stops
/// accepting, and the open connections send their goaway and drain on their own.
pub async fn accept<D: Dispatch>(
    listener: TcpListener,
    dispatch: Arc<D>,
    limits: Limits,
    closing: watch::Receiver<bool>,
) {
    let limits = ServeLimits {
        frame: limits,
        ..ServeLimits::default()
    };
    let open = Connections::new();
    accept_until(
        listener,
        dispatch,
        limits,
        None,
        open,
        closing.clone(),
        closing,
    )
    .await
}

/// [`accept`], but accepting goes on until `stop` turns true, while `closing` tells the
/// connections to send their goaway. A stopping server keeps accepting through its drain:
/// a caller that dialled before it heard of the stop then gets a goaway and
/// `shutting_down` answers (safe to fail over from) instead of a reset from a closed
/// listener's backlog after it already sent requests. Connections are counted in
/// `open`, which the server waits on to know every answer was written.
pub async fn accept_until<D: Dispatch>(
    mut listener: impl Incoming,
    dispatch: Arc<D>,
    limits: ServeLimits,
    tls: Option<ServerTls>,
    open: Arc<Connections>,
    closing: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.next() => match accepted {
                Ok(a) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    a
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off (doubling, so a
                    // full table does not spin a core), keep serving what is open.
                    tracing::warn!("accept failed, retrying in {backoff:?}: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
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
        let Some(place) = open.admit(limits.max_connections) else {
            // Every connection is busy: this one is closed at once.
            let (refused, _) = open.refused_and_evicted();
            if refused.is_power_of_two() {
                tracing::warn!(%peer, refused, "connection cap reached, every connection busy: refused");
            }
            continue;
        };
        let dispatch = dispatch.clone();
        let closing = closing.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            serve_stream(stream, peer, tls, dispatch, limits, closing, place).await
        });
    }
}

/// Serves one accepted TCP stream, over TLS when `tls` is given.
async fn serve_stream<D: Dispatch>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<ServerTls>,
    dispatch: Arc<D>,
    limits: ServeLimits,
    closing: watch::Receiver<bool>,
    place: registry::Admitted,
) {
    let _ = stream.set_nodelay(true);
    let Some(tls) = tls else {
        let (read, write) = stream.into_split();
        let conn = conn::Conn::new(Peer::plain(peer), dispatch, limits, place);
        return conn.run(read, write, closing).await;
    };
    let handshake = tokio::time::timeout(defaults::HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream));
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
    let (read, write) = tokio::io::split(stream);
    let peer = Arc::new(Peer { addr: peer, names });
    conn::Conn::new(peer, dispatch, limits, place)
        .run(read, write, closing)
        .await
}

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
