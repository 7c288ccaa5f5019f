//! The HTTP listener: HTTP/1.1 and HTTP/2 (prior knowledge) on one port, each
//! connection served by hyper with a header read timeout (a client that trickles its
//! headers is disconnected, so slow clients cannot hold connections open for free),
//! and a graceful stop: no new connections, in-flight requests finish (HTTP/2 gets a
//! GOAWAY, HTTP/1.1 closes after its current response), then whatever is left is cut.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::Forwarder;

/// A running HTTP listener.
pub struct HttpListener {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<JoinSet<()>>,
}

impl HttpListener {
    /// Listens on `addr` and serves every request with `forwarder`.
    pub async fn bind(addr: &str, forwarder: Arc<Forwarder>) -> std::io::Result<HttpListener> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, forwarder, stopped));
        Ok(HttpListener {
            addr: local,
            stop,
            accept,
        })
    }

    /// The address it listens on (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in flight finish for up to `drain`, then closes
    /// the connections still open.
    pub async fn shutdown(self, drain: Duration) {
        let _ = self.stop.send(true);
        let Ok(mut connections) = self.accept.await else {
            return;
        };
        let finished = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(drain, finished).await.is_err() {
            connections.abort_all();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    forwarder: Arc<Forwarder>,
    mut stopped: watch::Receiver<bool>,
) -> JoinSet<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(forwarder.header_read_timeout());
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped.changed() => break,
        };
        // Reap finished connections as we go, so the set holds only live ones.
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: wait a little rather than spin.
                tracing::warn!("http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let forwarder = forwarder.clone();
        let builder = builder.clone();
        let mut stopped = stopped.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let forwarder = forwarder.clone();
                async move { Ok::<_, Infallible>(forwarder.handle(req, peer).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                r = connection.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, "http connection ended: {e}");
                    }
                    return;
                }
                _ = stopped.wait_for(|s| *s) => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
    }
    connections
}
