//! The exporter: a thread of its own (its own small runtime, so the commands' runtimes
//! and their shutdown are untouched) that batches finished spans every second or 512
//! spans and POSTs them to the collector's `/v1/traces`. The queue between the request
//! path and this thread is bounded; a collector that does not answer costs one warning
//! and the batches sent to it meanwhile, counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, oneshot};
use tracing_subscriber::Layer;

use super::json;
use super::layer::{wanted, Finished, SpanLayer};

/// Spans waiting to be sent, at most; past it new spans are dropped (and counted).
const QUEUE: usize = 4096;
/// A batch is sent when it holds this many spans, or every [`EVERY`].
const BATCH: usize = 512;
const EVERY: Duration = Duration::from_secs(1);
/// One POST, connection included, at most.
const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// What exit waits, at most, for the last batch.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// The collector: `http://HOST:PORT[/PREFIX]`, spans POSTed to `PREFIX/v1/traces`.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    uri: Uri,
    host: String,
    port: u16,
}

impl Target {
    pub(crate) fn parse(url: &str) -> anyhow::Result<Target> {
        let bad = |why: &str| anyhow::anyhow!("--otlp-endpoint {url:?}: {why}");
        let base: Uri = url.trim().parse().map_err(|e| bad(&format!("{e}")))?;
        match base.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(bad(
                    "https is not supported; point it at a collector's plain HTTP port (4318)",
                ))
            }
            _ => return Err(bad("expected http://HOST:PORT")),
        }
        let host = base
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        let port = base.port_u16().unwrap_or(80);
        let prefix = base.path().trim_end_matches('/');
        let uri = format!("http://{host}:{port}{prefix}/v1/traces")
            .parse()
            .map_err(|e| bad(&format!("{e}")))?;
        Ok(Target {
            host: host.trim_matches(['[', ']']).to_string(),
            uri,
            port,
        })
    }
}

/// Kept by `main` until exit: dropping it sends the spans still queued (bounded).
pub struct Exporter {
    stop: Option<oneshot::Sender<()>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            let _ = self.done.recv_timeout(FLUSH_TIMEOUT);
        }
    }
}

/// Starts the exporter thread; the layer feeds it.
pub(crate) fn start(
    target: Target,
    service: String,
) -> anyhow::Result<(super::SpanLayer, Exporter)> {
    let (queue, spans) = mpsc::channel(QUEUE);
    let (stop, stopped) = oneshot::channel();
    let (finished, done) = std::sync::mpsc::channel();
    let dropped = Arc::new(AtomicU64::new(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let counted = dropped.clone();
    std::thread::Builder::new()
        .name("axle-otlp".into())
        .spawn(move || {
            runtime.block_on(run(target, service, spans, stopped, counted));
            let _ = finished.send(());
        })?;
    let layer = SpanLayer::new(queue, dropped)
        .with_filter(tracing_subscriber::filter::filter_fn(wanted))
        .boxed();
    Ok((
        layer,
        Exporter {
            stop: Some(stop),
            done,
        },
    ))
}

/// The sending loop, until `stop`; then what is queued is sent once more.
async fn run(
    target: Target,
    service: String,
    mut spans: mpsc::Receiver<Finished>,
    mut stop: oneshot::Receiver<()>,
    queue_drops: Arc<AtomicU64>,
) {
    let mut sender = Sender {
        target,
        service,
        failing: false,
        lost: 0,
    };
    let mut batch = Vec::new();
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tokio::select! {
            span = spans.recv() => match span {
                Some(span) => {
                    batch.push(span);
                    if batch.len() >= BATCH {
                        sender.send(&mut batch).await;
                    }
                }
                None => break,
            },
            _ = tick.tick() => sender.send(&mut batch).await,
            _ = &mut stop => break,
        }
    }
    while let Ok(span) = spans.try_recv() {
        batch.push(span);
        if batch.len() >= BATCH {
            sender.send(&mut batch).await;
        }
    }
    sender.send(&mut batch).await;
    let dropped = queue_drops.load(Ordering::Relaxed) + sender.lost;
    if dropped > 0 {
        tracing::warn!(
            "OTLP export: {dropped} spans were dropped (queue full or collector unreachable)"
        );
    }
}

/// Posts batches, warning once per outage.
struct Sender {
    target: Target,
    service: String,
    failing: bool,
    /// Spans in batches the collector did not take.
    lost: u64,
}

impl Sender {
    async fn send(&mut self, batch: &mut Vec<Finished>) {
        if batch.is_empty() {
            return;
        }
        let body = json::encode(&self.service, batch);
        let count = batch.len() as u64;
        batch.clear();
        let result = tokio::time::timeout(POST_TIMEOUT, post(&self.target, body))
            .await
            .unwrap_or_else(|_| Err("no answer within 5 s".into()));
        match result {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!(
                    "OTLP export to {} works again ({} spans dropped so far)",
                    self.target.uri,
                    self.lost
                );
            }
            Ok(()) => {}
            Err(e) => {
                self.lost += count;
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(
                        "OTLP export to {} failed ({e}); spans are dropped until it answers",
                        self.target.uri
                    );
                }
            }
        }
    }
}

/// One `POST /v1/traces` on a fresh connection (one a second at most: not worth a pool).
async fn post(target: &Target, body: Vec<u8>) -> Result<(), String> {
    let stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| e.to_string())?;
    let (mut request_sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let authority = target
        .uri
        .authority()
        .map(|a| a.as_str())
        .unwrap_or_default();
    let request = hyper::Request::post(target.uri.path())
        .header(HOST, authority)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = request_sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    // Read the answer to the end: the collector may report partial success there.
    let _ = response.into_body().collect().await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_base_urls_and_only_plain_http() {
        let t = Target::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(t.uri.to_string(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 4318));
        let t = Target::parse("http://collector/otlp/").unwrap();
        assert_eq!(t.uri.to_string(), "http://collector:80/otlp/v1/traces");
        assert!(Target::parse("https://c:4318")
            .unwrap_err()
            .to_string()
            .contains("https"));
        assert!(Target::parse("127.0.0.1:4318").is_err());
        assert!(Target::parse("not a url").is_err());
        assert!(Target::parse("").is_err());
    }
}
