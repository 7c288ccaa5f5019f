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
//! Each system gets the same warm-up, duration and concurrency, in rounds that interleave
//! the systems (`rounds.rs`); figures are req/s,
//! latency percentiles from an HDR histogram, CPU time per request (the whole process:
//! client and server together) and, when the binary counts them, allocations per request
//! (`alloc_count`), and the ratios the targets speak of.

mod drive;
mod plan;
mod rounds;
pub mod table;
mod tarpc_echo;
mod tonic_echo;

pub use drive::Cell;
pub(crate) use drive::{drive, drive_into};
pub use plan::Plan;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;

use axle::client::{CallOptions, Client, ClientConfig};
use axle::core::latency::Latency;
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
    /// Measured seconds (every round's, when the run had several).
    pub seconds: f64,
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
/// [`Report::payload_bytes`]). Those of req/s and of CPU per request are the median of
/// the ratios within each round; those of p99 are read from every round's latencies.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Ratios {
    pub concurrency: usize,
    /// The rounds each ratio of req/s or CPU is the median of (`rounds.rs`).
    pub rounds: usize,
    /// Axle req/s ÷ tonic req/s (when tonic ran).
    pub axle_vs_tonic: Option<f64>,
    /// Axle req/s ÷ raw framing req/s.
    pub axle_vs_raw: f64,
    /// The least and the greatest of `axle_vs_raw` over the rounds.
    pub axle_vs_raw_range: Option<[f64; 2]>,
    /// Axle p99 ÷ tonic p99 (target ≤ 1).
    pub axle_p99_vs_tonic: Option<f64>,
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
    /// The least and the greatest of `wasm_vs_native` over the rounds.
    pub wasm_vs_native_range: Option<[f64; 2]>,
    /// Axle CPU per request with wasm plugins ÷ with the native twins.
    pub wasm_vs_native_cpu: Option<f64>,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The payload the ratios are read at.
    pub payload_bytes: usize,
    /// Measured seconds per system and cell, every round's together.
    pub seconds_per_run: f64,
    /// Rounds per cell: every system ran once per round, the systems interleaved.
    pub rounds: usize,
    pub rows: Vec<Row>,
    pub ratios: Option<Ratios>,
    /// Every payload measured.
    pub payloads: Vec<usize>,
    /// Every concurrency measured.
    pub concurrencies: Vec<usize>,
}

/// The systems a run can compare.
pub const SYSTEMS: [&str; 6] = ["axle", "axle-native", "axle-tls", "raw", "tonic", "tarpc"];

/// Runs each of `systems` (default: all) at every cell of `plan`: every system is started
/// first, then each cell runs `plan.rounds` rounds, every system once per round, in an
/// order that turns by one each round (`rounds.rs` says why).
pub async fn run(
    host: &PluginHost,
    manifest: &Manifest,
    plan: &Plan,
    systems: &[&str],
) -> anyhow::Result<Report> {
    let mut targets = Vec::new();
    for system in SYSTEMS.into_iter().filter(|s| systems.contains(s)) {
        match start(system, host, manifest).await {
            Ok(target) => targets.push(target),
            Err(e) => {
                stop_all(targets).await;
                return Err(e.context(format!("starting `{system}`")));
            }
        }
    }
    let cells = plan.cells();
    let round_count = plan.rounds.max(1);
    // by_round[system][cell]: that system's rows of that cell, one per round.
    let mut by_round: Vec<Vec<Vec<Row>>> = vec![vec![Vec::new(); cells.len()]; targets.len()];
    let merged: Vec<Vec<Latency>> = targets
        .iter()
        .map(|_| cells.iter().map(|_| Latency::default()).collect())
        .collect();
    for (j, &(payload, c)) in cells.iter().enumerate() {
        let body = body(payload);
        for round in 0..round_count {
            for k in 0..targets.len() {
                let i = (k + round) % targets.len();
                let cell = plan.cell(targets[i].system, payload, c);
                let row = (targets[i].drive)(cell, &merged[i][j], body.clone()).await;
                by_round[i][j].push(row);
            }
        }
    }
    let names: Vec<&str> = targets.iter().map(|t| t.system).collect();
    stop_all(targets).await;
    let rows: Vec<Row> = by_round
        .iter()
        .zip(&merged)
        .flat_map(|(cells, merged)| {
            cells
                .iter()
                .zip(merged.iter())
                .map(|(rows, m)| rounds::combine(rows, &m.snapshot()))
        })
        .collect();
    let payload = plan.ratio_payload();
    let top = plan.concurrencies.iter().copied().max().unwrap_or(1);
    let at = cells.iter().position(|&cell| cell == (payload, top));
    // The rounds of `system` at the ratios' cell.
    let rounds_of = |system: &str| -> Option<&[Row]> {
        let i = names.iter().position(|&name| name == system)?;
        Some(&by_round[i][at?])
    };
    let find = |system: &str| {
        rows.iter()
            .find(|r| r.system == system && r.concurrency == top && r.payload_bytes == payload)
    };
    let req_per_s = |r: &Row| Some(r.req_per_s);
    let cpu = |r: &Row| r.cpu_us_per_req;
    let ratio = |a: &str, b: &str, of: fn(&Row) -> Option<f64>| {
        rounds::per_round(rounds_of(a)?, rounds_of(b)?, of)
    };
    let ratios = match (find("axle"), find("raw")) {
        (Some(a), Some(r)) => {
            let axle_vs_raw = ratio("axle", "raw", req_per_s);
            let wasm_vs_native = ratio("axle", "axle-native", req_per_s);
            Some(Ratios {
                concurrency: top,
                rounds: round_count,
                axle_vs_tonic: ratio("axle", "tonic", req_per_s).map(|s| s.median),
                axle_vs_raw: axle_vs_raw.map_or(0.0, |s| s.median),
                axle_vs_raw_range: axle_vs_raw.map(|s| s.range),
                axle_p99_vs_tonic: find("tonic").map(|t| a.p99_us / t.p99_us.max(1e-9)),
                tls_vs_plain: ratio("axle-tls", "axle", req_per_s).map(|s| s.median),
                axle_cpu_vs_tonic: ratio("axle", "tonic", cpu).map(|s| s.median),
                axle_vs_tarpc: ratio("axle", "tarpc", req_per_s).map(|s| s.median),
                axle_p99_vs_tarpc: find("tarpc").map(|p| a.p99_us / p.p99_us.max(1e-9)),
                axle_cpu_vs_tarpc: ratio("axle", "tarpc", cpu).map(|s| s.median),
                wasm_vs_native: wasm_vs_native.map(|s| s.median),
                wasm_vs_native_range: wasm_vs_native.map(|s| s.range),
                wasm_vs_native_cpu: ratio("axle", "axle-native", cpu).map(|s| s.median),
            })
            .filter(|_| r.requests > 0)
        }
        _ => None,
    };
    Ok(Report {
        payload_bytes: payload,
        seconds_per_run: plan.duration.as_secs_f64() * round_count as f64,
        rounds: round_count,
        rows,
        ratios,
        payloads: plan.payloads.clone(),
        concurrencies: plan.concurrencies.clone(),
    })
}

fn body(bytes: usize) -> Bytes {
    Bytes::from(vec![0x5a; bytes])
}

/// Runs one cell against one system, echoing `body`, its latencies added to `merged`
/// ([`drive_into`]). The system's call is typed inside, so each call's future is awaited
/// in place: only the cell is boxed.
type DriveFn =
    Box<dyn for<'a> Fn(Cell<'a>, &'a Latency, Bytes) -> BoxFuture<'a, Row> + Send + Sync>;

/// One system, started and answering, with how to stop it.
struct Target {
    system: &'static str,
    drive: DriveFn,
    stop: Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>,
}

impl Target {
    /// `call(client, body)` on clones of one client (one connection): a call echoes a
    /// body and says whether the answer came.
    fn new<C, Fut>(
        system: &'static str,
        client: C,
        call: fn(C, Bytes) -> Fut,
        stop: impl FnOnce() -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Target
    where
        C: Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        Target {
            system,
            drive: Box::new(move |cell, merged, body| {
                let client = client.clone();
                Box::pin(drive_into(cell, merged, move || {
                    // A body of each loop's own, as each caller's request is: one body
                    // cloned by every loop is one reference count written by every call
                    // on both cores, and a system that clones the body again (Axle, for
                    // its retries) would pay the harness's contention on it
                    // (`docs/performance.md`, "The harness's own recording").
                    let (client, body) = (client.clone(), Bytes::copy_from_slice(&body));
                    move || call(client.clone(), body.clone())
                }))
            }),
            stop: Box::new(stop),
        }
    }
}

async fn stop_all(targets: Vec<Target>) {
    for t in targets {
        (t.stop)().await;
    }
}

async fn start(
    system: &'static str,
    host: &PluginHost,
    manifest: &Manifest,
) -> anyhow::Result<Target> {
    match system {
        "axle" => start_axle(host, system, manifest.clone()).await,
        "axle-native" => {
            let natives =
                PluginHost::with_default_cache()?.with_natives(crate::native::host_natives());
            start_axle(&natives, system, manifest.clone()).await
        }
        "axle-tls" => {
            let pki = crate::pki::Pki::try_new()?;
            let mut m = manifest.clone();
            m.tls = pki.localhost();
            start_axle(host, system, m).await
        }
        "raw" => start_raw().await,
        "tonic" => start_tonic().await,
        "tarpc" => start_tarpc().await,
        other => anyhow::bail!("unknown system `{other}`"),
    }
}

/// Axle: the full pipelines with the manifest's plugins as `host` runs them (components,
/// or native twins), over TLS when the manifest's `[tls]` says.
async fn start_axle(
    host: &PluginHost,
    system: &'static str,
    manifest: Manifest,
) -> anyhow::Result<Target> {
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
    let call = |client: Client, body| async move {
        client
            .call_raw("echo", "echo", body, &CallOptions::default())
            .await
            .is_ok()
    };
    Ok(Target::new(system, client, call, move || {
        Box::pin(async move { server.shutdown(Duration::from_millis(200)).await })
    }))
}

/// The same framing and connection, no pipeline.
async fn start_raw() -> anyhow::Result<Target> {
    let (addr, accept) = start_raw_server().await?;
    let conn = Connection::connect(
        &addr.to_string(),
        Limits::default(),
        Keepalive::default(),
        None,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let call = |conn: Arc<Connection>, body| async move {
        let meta = Metadata {
            service: Some("echo".into()),
            method: Some("echo".into()),
            ..Metadata::default()
        };
        conn.call(0, meta, body, Instant::now() + Duration::from_secs(5))
            .await
            .is_ok()
    };
    let stop = {
        let conn = conn.clone();
        move || -> BoxFuture<'static, ()> {
            conn.close();
            accept.abort();
            Box::pin(std::future::ready(()))
        }
    };
    Ok(Target::new("raw", conn, call, stop))
}

/// gRPC over HTTP/2 (tonic), same bytes.
async fn start_tonic() -> anyhow::Result<Target> {
    let (addr, server) = tonic_echo::start_server().await?;
    let client = tonic_echo::EchoClient::connect(addr)
        .await
        .map_err(|e| anyhow::anyhow!("tonic client: {e}"))?;
    let call =
        |mut client: tonic_echo::EchoClient, body| async move { client.echo(body).await.is_ok() };
    Ok(Target::new("tonic", client, call, aborting(server)))
}

/// tarpc's own binary protocol, same bytes.
async fn start_tarpc() -> anyhow::Result<Target> {
    let (addr, server) = tarpc_echo::start_server().await?;
    let client = tarpc_echo::connect(addr)
        .await
        .map_err(|e| anyhow::anyhow!("tarpc client: {e}"))?;
    let call = |client, body| async move { tarpc_echo::echo(&client, body).await.is_ok() };
    Ok(Target::new("tarpc", client, call, aborting(server)))
}

/// Stops a server task by aborting it.
fn aborting(
    task: tokio::task::JoinHandle<()>,
) -> impl FnOnce() -> BoxFuture<'static, ()> + Send + 'static {
    move || {
        task.abort();
        Box::pin(std::future::ready(()))
    }
}

/// Echoes every request at the transport level: no limiter, no handler lookup, no plugin.
struct RawEcho;

impl Dispatch for RawEcho {
    fn dispatch(
        self: Arc<Self>,
        request: Frame,
        _peer: &Arc<Peer>,
        _arrived: std::time::Instant,
    ) -> BoxFuture<'static, Frame> {
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
