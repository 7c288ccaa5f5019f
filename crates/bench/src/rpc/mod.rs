//! `axle bench rpc`: loopback echo of a 1 KiB payload at concurrency 1 and 64, in one run:
//!
//! - `axle` — the full client and server pipelines with the manifest's wasm plugins in the
//!   path (router, selector, limiter; the payload is bytes, so no serializer runs);
//! - `raw` — the same framing and multiplexed connection over tokio TCP with no pipeline
//!   and no plugin: the limit Axle's pipeline can approach;
//! - `tonic` — gRPC over HTTP/2 echoing the same bytes (no protobuf), one connection.
//!
//! Each system gets the same warm-up, duration and concurrency; figures are req/s and
//! latency percentiles from an HDR histogram, and the ratios the targets speak of.

mod tonic_echo;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::core::latency::Latency;
use bytes::Bytes;
use futures::future::BoxFuture;

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::server::ServerBuilder;
use axle::transport::connection::Connection;
use axle::transport::serve::{self, Dispatch, Peer};
use axle::transport::Keepalive;
use axle::wire::{Frame, Limits, Metadata};

/// The payload every system echoes.
pub const PAYLOAD_BYTES: usize = 1024;

/// One system at one concurrency.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub system: String,
    pub concurrency: usize,
    pub requests: u64,
    pub errors: u64,
    pub req_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// The ratios the targets are stated in (at the highest concurrency measured).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Ratios {
    pub concurrency: usize,
    /// Axle req/s ÷ tonic req/s (target ≥ 1.5).
    pub axle_vs_tonic: f64,
    /// Axle req/s ÷ raw framing req/s (target ≥ 0.7).
    pub axle_vs_raw: f64,
    /// Axle p99 ÷ tonic p99 (target ≤ 1).
    pub axle_p99_vs_tonic: f64,
    /// Axle over TLS req/s ÷ Axle over plain TCP req/s (when both ran).
    pub tls_vs_plain: Option<f64>,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub payload_bytes: usize,
    pub seconds_per_run: f64,
    pub rows: Vec<Row>,
    pub ratios: Option<Ratios>,
}

/// The systems a run can compare.
pub const SYSTEMS: [&str; 4] = ["axle", "axle-tls", "raw", "tonic"];

/// Runs each of `systems` (default: all) at every concurrency for `duration` each.
pub async fn run(
    host: &PluginHost,
    manifest: &Manifest,
    duration: Duration,
    concurrencies: &[usize],
    systems: &[&str],
) -> anyhow::Result<Report> {
    let mut rows = Vec::new();
    if systems.contains(&"axle") {
        rows.extend(run_axle(host, manifest.clone(), duration, concurrencies).await?);
    }
    if systems.contains(&"axle-tls") {
        let pki = crate::pki::Pki::try_new()?;
        let mut m = manifest.clone();
        m.tls = pki.localhost();
        rows.extend(run_axle(host, m, duration, concurrencies).await?);
    }
    if systems.contains(&"raw") {
        rows.extend(run_raw(duration, concurrencies).await?);
    }
    if systems.contains(&"tonic") {
        rows.extend(run_tonic(duration, concurrencies).await?);
    }
    let top = concurrencies.iter().copied().max().unwrap_or(1);
    let find = |system: &str| {
        rows.iter()
            .find(|r| r.system == system && r.concurrency == top)
    };
    let ratios = match (find("axle"), find("raw"), find("tonic")) {
        (Some(a), Some(r), Some(t)) => Some(Ratios {
            concurrency: top,
            axle_vs_tonic: a.req_per_s / t.req_per_s.max(1e-9),
            axle_vs_raw: a.req_per_s / r.req_per_s.max(1e-9),
            axle_p99_vs_tonic: a.p99_us / t.p99_us.max(1e-9),
            tls_vs_plain: find("axle-tls").map(|tls| tls.req_per_s / a.req_per_s.max(1e-9)),
        }),
        _ => None,
    };
    Ok(Report {
        payload_bytes: PAYLOAD_BYTES,
        seconds_per_run: duration.as_secs_f64(),
        rows,
        ratios,
    })
}

fn body() -> Bytes {
    Bytes::from(vec![0x5a; PAYLOAD_BYTES])
}

/// Axle: the full pipelines with the manifest's plugins (over TLS when its `[tls]` says,
/// and then the row is `axle-tls`).
async fn run_axle(
    host: &PluginHost,
    manifest: Manifest,
    duration: Duration,
    concurrencies: &[usize],
) -> anyhow::Result<Vec<Row>> {
    let system = if manifest.tls.client.is_some() {
        "axle-tls"
    } else {
        "axle"
    };
    let body = body();
    let mut rows = Vec::new();
    let server = ServerBuilder::new().with_manifest(host, &manifest)?;
    let server = axle::services::echo::register(server)
        .bind("127.0.0.1:0")
        .await?;
    let mut m = manifest.clone();
    m.endpoints.clear();
    let client = Client::new(
        host,
        ClientConfig::new(m)
            .endpoints("echo", [EndpointSpec::new(server.local_addr().to_string())]),
    )?;
    for &c in concurrencies {
        let client = client.clone();
        let body = body.clone();
        let row = drive(system, c, duration, move || {
            let client = client.clone();
            let body = body.clone();
            Box::pin(async move {
                client
                    .call_raw("echo", "echo", body, &CallOptions::default())
                    .await
                    .is_ok()
            })
        })
        .await;
        rows.push(row);
    }
    server.shutdown(Duration::from_millis(200)).await;
    Ok(rows)
}

/// The same framing and connection, no pipeline.
async fn run_raw(duration: Duration, concurrencies: &[usize]) -> anyhow::Result<Vec<Row>> {
    let body = body();
    let mut rows = Vec::new();
    let (addr, accept) = start_raw_server().await?;
    let conn = Connection::connect(
        &addr.to_string(),
        Limits::default(),
        Keepalive::default(),
        None,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    for &c in concurrencies {
        let conn = conn.clone();
        let body = body.clone();
        let row = drive("raw", c, duration, move || {
            let conn = conn.clone();
            let body = body.clone();
            Box::pin(async move {
                let meta = Metadata {
                    service: Some("echo".into()),
                    method: Some("echo".into()),
                    ..Metadata::default()
                };
                conn.call(0, meta, body, Instant::now() + Duration::from_secs(5))
                    .await
                    .is_ok()
            })
        })
        .await;
        rows.push(row);
    }
    conn.close();
    accept.abort();
    Ok(rows)
}

/// gRPC over HTTP/2 (tonic), same bytes.
async fn run_tonic(duration: Duration, concurrencies: &[usize]) -> anyhow::Result<Vec<Row>> {
    let body = body();
    let mut rows = Vec::new();
    let (addr, tonic_server) = tonic_echo::start_server().await?;
    let tonic_client = tonic_echo::EchoClient::connect(addr)
        .await
        .map_err(|e| anyhow::anyhow!("tonic client: {e}"))?;
    for &c in concurrencies {
        let tc = tonic_client.clone();
        let body = body.clone();
        let row = drive("tonic", c, duration, move || {
            let mut tc = tc.clone();
            let body = body.clone();
            Box::pin(async move { tc.echo(body).await.is_ok() })
        })
        .await;
        rows.push(row);
    }
    tonic_server.abort();
    Ok(rows)
}

/// `concurrency` loops calling `call` for `duration` after a short warm-up.
pub(crate) async fn drive<F>(system: &str, concurrency: usize, duration: Duration, call: F) -> Row
where
    F: Fn() -> BoxFuture<'static, bool> + Send + Sync + 'static,
{
    let call = Arc::new(call);
    // Warm-up: connections, caches, the allocator.
    warm(&call, concurrency, Duration::from_millis(200)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let hist = Arc::new(Latency::default());
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (call, stop, hist, errors) =
                (call.clone(), stop.clone(), hist.clone(), errors.clone());
            tokio::spawn(async move {
                let local = Latency::default();
                while !stop.load(Relaxed) {
                    let t = Instant::now();
                    if call().await {
                        local.record(t.elapsed().as_nanos() as u64);
                    } else {
                        errors.fetch_add(1, Relaxed);
                    }
                }
                hist.merge(&local);
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let h = hist.snapshot();
    Row {
        system: system.to_string(),
        concurrency,
        requests: h.count,
        errors: errors.load(Relaxed),
        req_per_s: h.count as f64 / elapsed,
        p50_us: h.p50_ns as f64 / 1000.0,
        p99_us: h.p99_ns as f64 / 1000.0,
    }
}

async fn warm<F: Fn() -> BoxFuture<'static, bool> + Send + Sync + 'static>(
    call: &Arc<F>,
    concurrency: usize,
    d: Duration,
) {
    let until = Instant::now() + d;
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let call = call.clone();
            tokio::spawn(async move {
                while Instant::now() < until {
                    call().await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// Echoes every request at the transport level: no limiter, no handler lookup, no plugin.
struct RawEcho;

impl Dispatch for RawEcho {
    fn dispatch(self: Arc<Self>, request: Frame, _peer: &Arc<Peer>) -> BoxFuture<'static, Frame> {
        Box::pin(std::future::ready(Frame::response(
            request.id,
            request.meta.content_type,
            request.payload,
        )))
    }
}

/// A server that echoes every request at the transport level (the `raw` system).
pub async fn start_raw_server() -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (closing_tx, closing) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        // Never closed: the task is aborted when the run is over.
        let _closing = closing_tx;
        serve::accept(listener, Arc::new(RawEcho), Limits::default(), closing).await
    });
    Ok((addr, task))
}
