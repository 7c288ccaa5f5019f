//! `axle serve`: hosts the built-in services (echo, flaky, kv) through the provider
//! pipeline, until SIGTERM or Ctrl-C, then stops outside-in.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axle::manifest::Manifest;
use axle::plugin::PluginHost;
use axle::server::ServerBuilder;
use axle::services::{self, flaky::FlakyConfig};

/// `axle serve` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The manifest (default: the one embedded in the binary).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Where to listen (default: the manifest's [serve] listen, else 127.0.0.1:7300).
    /// Port 0 picks a free port; the chosen address is printed.
    #[arg(long)]
    listen: Option<String>,
    /// flaky: base latency of every request (ms).
    #[arg(long)]
    flaky_latency_ms: Option<f64>,
    /// flaky: uniform extra latency 0..N (ms).
    #[arg(long)]
    flaky_jitter_ms: Option<f64>,
    /// flaky: share of requests that take --flaky-slow-ms more.
    #[arg(long)]
    flaky_slow_rate: Option<f64>,
    /// flaky: the slow tail's extra latency (ms).
    #[arg(long)]
    flaky_slow_ms: Option<f64>,
    /// flaky: share of requests that fail with `internal`.
    #[arg(long)]
    flaky_fail_rate: Option<f64>,
    /// flaky: share of requests that never answer.
    #[arg(long)]
    flaky_timeout_rate: Option<f64>,
    /// Largest frame accepted or sent (bytes).
    #[arg(long)]
    max_frame_bytes: Option<usize>,
    /// How long to wait for requests in flight when stopping (ms).
    #[arg(long, default_value_t = 5000)]
    drain_ms: u64,
    #[command(flatten)]
    admin: super::admin::AdminArgs,
}

fn flaky(base: FlakyConfig, a: &Args) -> FlakyConfig {
    FlakyConfig {
        latency_ms: a.flaky_latency_ms.unwrap_or(base.latency_ms),
        jitter_ms: a.flaky_jitter_ms.unwrap_or(base.jitter_ms),
        slow_rate: a.flaky_slow_rate.unwrap_or(base.slow_rate),
        slow_ms: a.flaky_slow_ms.unwrap_or(base.slow_ms),
        fail_rate: a.flaky_fail_rate.unwrap_or(base.fail_rate),
        timeout_rate: a.flaky_timeout_rate.unwrap_or(base.timeout_rate),
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    let flaky = flaky(manifest.serve.flaky, &args);
    flaky
        .validate()
        .map_err(|e| anyhow::anyhow!("--flaky-*: {e}"))?;
    let host = std::sync::Arc::new(PluginHost::with_default_cache()?);
    let builder = ServerBuilder::new().with_manifest(&host, &manifest)?;
    let mut builder = services::register(builder, flaky);
    if let Some(max) = args.max_frame_bytes {
        builder = builder.limits(axle::wire::Limits {
            max_frame: max,
            ..axle::wire::Limits::default()
        });
    }
    let listen = args
        .listen
        .or(manifest.serve.listen.clone())
        .unwrap_or_else(|| axle::manifest::defaults::LISTEN.to_string());
    let server = builder
        .bind(&listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    // Hot-swap: the limiter follows the manifest file, and `axle swap` through the admin.
    let swapper = std::sync::Arc::new(
        axle::swap::Swapper::new(host.clone(), args.manifest.clone(), Vec::new())
            .with_server(server.limiter_slot()),
    );
    let _watch = match &args.manifest {
        Some(_) => Some(axle::swap::watch::start(swapper.clone(), |_| {})?),
        None => None,
    };
    let admin = args
        .admin
        .start(
            axle::admin::Admin::new()
                .server("serve", &server)
                .swapper(swapper),
        )
        .await?;
    // The line scripts and tests wait for, then the admin endpoint's (a second line, so
    // readers of the first are unaffected). A reader that went away is no reason to stop.
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {}", server.local_addr());
        if let Some(a) = &admin {
            let _ = writeln!(out, "admin on {}", a.local_addr());
        }
        let _ = out.flush();
    }
    wait_for_stop().await;
    tracing::info!("stopping: draining requests in flight");
    if let Some(a) = admin {
        a.shutdown(Duration::ZERO).await;
    }
    server.shutdown(Duration::from_millis(args.drain_ms)).await;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_stop() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
