//! `axle bench rpc`: loopback echo in one run, every system at every cell (payload ×
//! concurrency) of a [`Plan`]:
//!
//! - `axle` — the full client and server pipelines with the manifest's wasm plugins in the
//!   path (router, selector, limiter; the payload is bytes, so no serializer runs);
//! - `axle-native` — the same pipelines with the selector's and the limiter's native twins
//!   in place of their components (`axle_plugin_host::native`), so no component is called
//!   per request: `axle` ÷ this is what the wasm boundary costs end to end;
//! - `axle-tls` — the same over TLS (a throwaway CA);
//! - `raw` — the same framing and multiplexed connection over tokio TCP with no pipeline
//!   and no plugin: the limit Axle's pipeline can approach;
//! - `tonic` — gRPC over HTTP/2 echoing the same bytes (no protobuf), one connection;
//! - `tarpc` — tarpc's own binary protocol (bincode over length-delimited TCP), one
//!   connection: a peer shaped like Axle's wire, without HTTP/2.
//!
//! Each system gets the same warm-up, duration and concurrency; figures are req/s,
//! latency percentiles from an HDR histogram, CPU time per request (the whole process:
//! client and server together) and, when the binary counts them, allocations per request
//! (`alloc_count`), and the ratios the targets speak of.

mod drive;
mod plan;
pub mod table;
mod tarpc_echo;
mod tonic_echo;

pub(crate) use drive::drive;
pub use drive::Cell;
pub use plan::Plan;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// The payload of the default run (and of the ratios when a sweep measured it).
pub const PAYLOAD_BYTES: usize = 1024;

/// One system at one payload and concurrency.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub system: String,
    pub concurrency: usize,
    pub requests: u64,
    pub errors: u64,
    pub req_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The echoed payload.
    pub payload_bytes: usize,
    /// Process CPU time (user + system, client and server together) per request.
    pub cpu_us_per_req: Option<f64>,
    /// Process allocations per request; `None` unless the binary counts them.
    pub allocs_per_req: Option<f64>,
}

/// The ratios the targets are stated in (at the highest concurrency measured, at
/// [`Report::payload_bytes`]).
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
    /// Axle CPU per request ÷ tonic CPU per request.
    pub axle_cpu_vs_tonic: Option<f64>,
    /// Axle req/s ÷ tarpc req/s (when tarpc ran).
    pub axle_vs_tarpc: Option<f64>,
    /// Axle p99 ÷ tarpc p99.
    pub axle_p99_vs_tarpc: Option<f64>,
    /// Axle CPU per request ÷ tarpc CPU per request.
    pub axle_cpu_vs_tarpc: Option<f64>,
    /// Axle req/s with wasm plugins ÷ with the native twins (when both ran).
    pub wasm_vs_native: Option<f64>,
    /// Axle CPU per request with wasm plugins ÷ with the native twins.
    pub wasm_vs_native_cpu: Option<f64>,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The payload the ratios are read at.
    pub payload_bytes: usize,
    pub seconds_per_run: f64,
    pub rows: Vec<Row>,
    pub ratios: Option<Ratios>,
    /// Every payload measured.
    pub payloads: Vec<usize>,
    /// Every concurrency measured.
    pub concurrencies: Vec<usize>,
}

/// The systems a run can compare.
pub const SYSTEMS: [&str; 6] = ["axle", "axle-native", "axle-tls", "raw", "tonic", "tarpc"];

/// Runs each of `systems` (default: all) at every cell of `plan`.
pub async fn run(
    host: &PluginHost,
    manifest: &Manifest,
    plan: &Plan,
    systems: &[&str],
) -> anyhow::Result<Report> {
    let mut rows = Vec::new();
    if systems.contains(&"axle") {
        rows.extend(run_axle(host, "axle", manifest.clone(), plan).await?);
    }
    if systems.contains(&"axle-native") {
        let natives = PluginHost::with_default_cache()?.with_natives(crate::native::host_natives());
        rows.extend(run_axle(&natives, "axle-native", manifest.clone(), plan).await?);
    }
    if systems.contains(&"axle-tls") {
        let pki = crate::pki::Pki::try_new()?;
        let mut m = manifest.clone();
        m.tls = pki.localhost();
        rows.extend(run_axle(host, "axle-tls", m, plan).await?);
    }
    if systems.contains(&"raw") {
        rows.extend(run_raw(plan).await?);
    }
    if systems.contains(&"tonic") {
        rows.extend(run_tonic(plan).await?);
    }
    if systems.contains(&"tarpc") {
        rows.extend(run_tarpc(plan).await?);
    }
    let payload = plan.ratio_payload();
    let top = plan.concurrencies.iter().copied().max().unwrap_or(1);
    let find = |system: &str| {
        rows.iter()
            .find(|r| r.system == system && r.concurrency == top && r.payload_bytes == payload)
    };
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?.max(1e-9));
    let ratios = match (find("axle"), find("raw"), find("tonic")) {
        (Some(a), Some(r), Some(t)) => Some(Ratios {
            concurrency: top,
            axle_vs_tonic: a.req_per_s / t.req_per_s.max(1e-9),
            axle_vs_raw: a.req_per_s / r.req_per_s.max(1e-9),
            axle_p99_vs_tonic: a.p99_us / t.p99_us.max(1e-9),
            tls_vs_plain: find("axle-tls").map(|tls| tls.req_per_s / a.req_per_s.max(1e-9)),
            axle_cpu_vs_tonic: ratio(a.cpu_us_per_req, t.cpu_us_per_req),
            axle_vs_tarpc: find("tarpc").map(|p| a.req_per_s / p.req_per_s.max(1e-9)),
            axle_p99_vs_tarpc: find("tarpc").map(|p| a.p99_us / p.p99_us.max(1e-9)),
            axle_cpu_vs_tarpc: find("tarpc")
                .and_then(|p| ratio(a.cpu_us_per_req, p.cpu_us_per_req)),
            wasm_vs_native: find("axle-native").map(|n| a.req_per_s / n.req_per_s.max(1e-9)),
            wasm_vs_native_cpu: find("axle-native")
                .and_then(|n| ratio(a.cpu_us_per_req, n.cpu_us_per_req)),
        }),
        _ => None,
    };
    Ok(Report {
        payload_bytes: payload,
        seconds_per_run: plan.duration.as_secs_f64(),
        rows,
        ratios,
        payloads: plan.payloads.clone(),
        concurrencies: plan.concurrencies.clone(),
    })
}

fn body(bytes: usize) -> Bytes {
    Bytes::from(vec![0x5a; bytes])
}

/// Axle: the full pipelines with the manifest's plugins as `host` runs them (components,
/// or native twins), over TLS when the manifest's `[tls]` says.
async fn run_axle(
    host: &PluginHost,
    system: &str,
    manifest: Manifest,
    plan: &Plan,
) -> anyhow::Result<Vec<Row>> {
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
    let rows = every_cell(plan, system, client, |client, body| async move {
        client
            .call_raw("echo", "echo", body, &CallOptions::default())
            .await
            .is_ok()
    })
    .await;
    server.shutdown(Duration::from_millis(200)).await;
    Ok(rows)
}

/// The same framing and connection, no pipeline.
async fn run_raw(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let (addr, accept) = start_raw_server().await?;
    let conn = Connection::connect(
        &addr.to_string(),
        Limits::default(),
        Keepalive::default(),
        None,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let rows = every_cell(plan, "raw", conn.clone(), |conn, body| async move {
        let meta = Metadata {
            service: Some("echo".into()),
            method: Some("echo".into()),
            ..Metadata::default()
        };
        conn.call(0, meta, body, Instant::now() + Duration::from_secs(5))
            .await
            .is_ok()
    })
    .await;
    conn.close();
    accept.abort();
    Ok(rows)
}

/// gRPC over HTTP/2 (tonic), same bytes.
async fn run_tonic(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let (addr, server) = tonic_echo::start_server().await?;
    let client = tonic_echo::EchoClient::connect(addr)
        .await
        .map_err(|e| anyhow::anyhow!("tonic client: {e}"))?;
    let rows = every_cell(plan, "tonic", client, |mut client, body| async move {
        client.echo(body).await.is_ok()
    })
    .await;
    server.abort();
    Ok(rows)
}

/// tarpc's own binary protocol, same bytes.
async fn run_tarpc(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let (addr, server) = tarpc_echo::start_server().await?;
    let client = tarpc_echo::connect(addr)
        .await
        .map_err(|e| anyhow::anyhow!("tarpc client: {e}"))?;
    let rows = every_cell(plan, "tarpc", client, |client, body| async move {
        tarpc_echo::echo(&client, body).await.is_ok()
    })
    .await;
    server.abort();
    Ok(rows)
}

/// Every cell of `plan` for `system`: each call echoes the cell's payload through
/// `call(client, body)`, on clones of one client (one connection).
async fn every_cell<C, Fut>(
    plan: &Plan,
    system: &str,
    client: C,
    call: fn(C, Bytes) -> Fut,
) -> Vec<Row>
where
    C: Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let mut rows = Vec::new();
    for (payload, c) in plan.cells() {
        let client = client.clone();
        let body = body(payload);
        let row = drive(plan.cell(system, payload, c), move || {
            Box::pin(call(client.clone(), body.clone()))
        })
        .await;
        rows.push(row);
    }
    rows
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
