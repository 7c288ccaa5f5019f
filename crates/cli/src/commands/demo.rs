//! `axle demo`: three providers and a consumer on loopback, in this one process, with the
//! default manifest's plugins in the path (json serializer, tag router, round-robin
//! selector, token-bucket limiter). Drives load for a few seconds with a progress line,
//! then prints per-endpoint request counts, p50/p99 latency and errors.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client, ClientConfig};
use axle::core::latency::Latency;
use axle::discovery::{Provider, RegistryUrl, ServiceKey};
use axle::manifest::{EndpointSpec, Manifest};
use axle::server::ServerBuilder;
use axle::services::{self, flaky::FlakyConfig};

/// `axle demo` flags.
#[derive(clap::Args)]
pub struct Args {
    /// Serve and call over TLS with a throwaway CA made for this run (to see what TLS
    /// costs; --tls-cert and --tls-ca take real certificates).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_ca"])]
    tls: bool,
    #[command(flatten)]
    server_tls: super::tls::ServerTlsArgs,
    #[command(flatten)]
    client_tls: super::tls::ClientTlsArgs,
    /// The manifest (default: the one embedded in the binary).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// How long to drive load (seconds).
    #[arg(long, default_value_t = 4)]
    seconds: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    #[command(flatten)]
    admin: super::admin::AdminArgs,
    /// With `--registry etcd://...` the providers register there and the consumer finds
    /// them through it (default: the consumer is handed their addresses).
    #[command(flatten)]
    discovery: super::discovery::Args,
}

/// Each provider's `flaky` behaviour: one fast, one medium, one slow with a tail and a few
/// failures, so the table shows what the strategies see.
fn providers() -> [FlakyConfig; 3] {
    [
        FlakyConfig {
            latency_ms: 0.2,
            jitter_ms: 0.3,
            ..FlakyConfig::default()
        },
        FlakyConfig {
            latency_ms: 1.0,
            jitter_ms: 1.0,
            ..FlakyConfig::default()
        },
        FlakyConfig {
            latency_ms: 2.0,
            jitter_ms: 2.0,
            slow_rate: 0.02,
            slow_ms: 20.0,
            fail_rate: 0.01,
            ..FlakyConfig::default()
        },
    ]
}

struct PerEndpoint {
    latency: Latency,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    args.server_tls.apply(&mut manifest)?;
    args.client_tls.apply(&mut manifest);
    let _pki = match args.tls {
        true => {
            let pki = axle_bench::pki::Pki::try_new()?;
            manifest.tls = pki.localhost();
            Some(pki)
        }
        false => None,
    };
    // The demo's providers are its own three; the manifest's endpoints are not dialled.
    manifest.endpoints.clear();
    let host = Arc::new(crate::progress::plugin_host()?);
    let mut servers = Vec::new();
    for flaky in providers() {
        let builder = ServerBuilder::new().with_manifest(&host, &manifest)?;
        let server = services::register(builder, flaky)
            .bind("127.0.0.1:0")
            .await?;
        servers.push(server);
    }
    let addrs: Vec<String> = servers.iter().map(|s| s.local_addr().to_string()).collect();
    let registry = args.discovery.registry(&manifest)?;
    let discover = registry != RegistryUrl::Static;
    let mut _follows = super::discovery::Follows::default();
    let client = if discover {
        // Inside-out: the providers register (after readiness), the consumer discovers.
        let backend = super::discovery::open(&registry, &manifest)?;
        let namespace = args.discovery.namespace(&manifest);
        let group = args.discovery.groups(&manifest, "flaky").primary;
        let key = ServiceKey::new(&namespace, "flaky", &group)?;
        for server in &mut servers {
            let instance = Provider::new(server.local_addr().to_string());
            axle::exposure::register(
                server,
                backend.as_ref(),
                std::slice::from_ref(&key),
                instance,
                Duration::from_millis(manifest.discovery.ready_timeout_ms),
            )
            .await?;
        }
        let client = Client::new(
            &host,
            ClientConfig::new(manifest.clone()).endpoints("flaky", Vec::new()),
        )?;
        let base = super::rules_follow::RuleBase::new(host.clone(), args.manifest.as_deref())?;
        _follows = args
            .discovery
            .follow(&manifest, base, &backend, &client, &["flaky"])
            .await?;
        println!(
            "axle demo: providers registered at {} as {key}; the consumer follows it",
            backend.describe()
        );
        client
    } else {
        Client::new(
            &host,
            ClientConfig::new(manifest.clone())
                .endpoints("flaky", addrs.iter().map(EndpointSpec::new)),
        )?
    };
    println!(
        "axle demo: 3 providers on {}; selector `{}`, serializer `{}`, {} in the path",
        addrs.join(", "),
        manifest.slots_for("flaky").selector.unwrap_or_default(),
        manifest.slots_for("flaky").serializer.unwrap_or_default(),
        manifest
            .slots
            .limiter
            .as_deref()
            .map_or("no limiter".to_string(), |l| format!("limiter `{l}`")),
    );
    // Hot-swap: the manifest file (if one was given) is watched, and `axle swap` works
    // through the admin endpoint.
    let mut swapper =
        axle::swap::Swapper::new(host.clone(), args.manifest.clone(), vec![client.clone()]);
    for server in &servers {
        swapper = swapper.with_server(server.limiter_slot());
    }
    let swapper = Arc::new(swapper);
    let _watch = match &args.manifest {
        Some(_) => Some(axle::swap::watch::start(swapper.clone(), |_| {})?),
        None => None,
    };
    let mut exposed = axle::admin::Admin::new()
        .client("demo", client.clone())
        .swapper(swapper);
    for (i, server) in servers.iter().enumerate() {
        exposed = exposed.server(&format!("provider-{i}"), server);
    }
    let admin = args.admin.start(exposed).await?;
    if let Some(a) = &admin {
        println!("admin on {} (axle stats --admin {0})", a.local_addr());
        a.set_ready(true);
    }

    let stats: Arc<Mutex<BTreeMap<u32, PerEndpoint>>> = Arc::default();
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let (client, stats, done, nep, stop) = (
            client.clone(),
            stats.clone(),
            done.clone(),
            failed.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            let options = CallOptions::timeout(Duration::from_millis(500));
            let req = serde_json::json!({ "worker": w, "msg": "hello through wasm" });
            let Ok(value) = axle::payload::to_value(&req) else {
                return;
            };
            while !stop.load(Relaxed) {
                let t = Instant::now();
                let result = client
                    .call_value_at("flaky", "echo", &value, &options)
                    .await;
                let ns = t.elapsed().as_nanos() as u64;
                done.fetch_add(1, Relaxed);
                let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                match result {
                    Ok(answer) => {
                        // Latency per endpoint that answered (a fallback has none).
                        let key = answer.endpoint.unwrap_or(u32::MAX);
                        let e = s.entry(key).or_insert_with(new_entry);
                        e.latency.record(ns);
                    }
                    Err(_) => {
                        // Failed calls; per endpoint, the facts' counts say where.
                        nep.fetch_add(1, Relaxed);
                    }
                }
            }
        }));
    }
    let total = Duration::from_secs(args.seconds.max(1));
    let progress = crate::progress::bar(total.as_millis() as u64);
    let mut last = 0;
    while started.elapsed() < total {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = done.load(Relaxed);
        progress.set_position(started.elapsed().as_millis() as u64);
        progress.set_message(format!(
            "{now:>8} requests  {:>8.0} req/s now",
            (now - last) as f64 * 4.0
        ));
        last = now;
    }
    progress.finish_and_clear();
    stop.store(true, Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total_done = done.load(Relaxed);

    // Every worker has stopped: take the results out of the lock.
    let s = std::mem::take(&mut *stats.lock().unwrap_or_else(|e| e.into_inner()));
    let views = client.endpoints();
    println!(
        "\n{:<22} {:>9} {:>7} {:>10} {:>10} {:>7}",
        "endpoint", "requests", "share", "p50", "p99", "errors"
    );
    for v in &views {
        let ok = s.get(&v.id);
        let count = ok.map_or(0, |e| e.latency.snapshot().count);
        println!(
            "{:<22} {:>9} {:>6.1}% {:>10} {:>10} {:>7}",
            v.address,
            v.calls,
            100.0 * v.calls as f64 / total_done.max(1) as f64,
            ok.map_or("-".into(), |e| us(e.latency.snapshot().p50_ns / 1000)),
            ok.map_or("-".into(), |e| us(e.latency.snapshot().p99_ns / 1000)),
            v.calls.saturating_sub(count),
        );
    }
    println!(
        "\n{total_done} requests in {elapsed:.1}s ({:.0} req/s), {} failed",
        total_done as f64 / elapsed,
        failed.load(Relaxed)
    );
    if let Some(a) = admin {
        a.shutdown(Duration::ZERO).await;
    }
    for server in servers {
        server.shutdown(Duration::from_secs(1)).await;
    }
    Ok(ExitCode::SUCCESS)
}

fn new_entry() -> PerEndpoint {
    PerEndpoint {
        latency: Latency::default(),
    }
}

fn us(v: u64) -> String {
    if v >= 1000 {
        format!("{:.2} ms", v as f64 / 1000.0)
    } else {
        format!("{v} µs")
    }
}
