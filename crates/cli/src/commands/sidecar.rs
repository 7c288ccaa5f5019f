//! `axle sidecar --app http://127.0.0.1:PORT`: Axle for an application in any language
//! on the same host (`docs/gateway.md`). It serves the services of `[sidecar.provides]`
//! over Axle, forwarding each request to the application, and gives the application a
//! loopback HTTP listener (`--local`) for calling other services.
//!
//! Output: `local on ADDR` (the application's outbound listener), then, when it
//! provides services, `listening on ADDR` and one `registered KEY` per service once the
//! application's health URL answered; `stopped` when it exits.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axle::discovery::{Provider, RegistryUrl, ServiceKey};
use axle::manifest::Manifest;
use axle::plugin::PluginHost;
use axle::server::ServerBuilder;
use axle_gateway::sidecar::{self, app::App};
use axle_gateway::{Forwarder, HttpListener};

use super::gateway::print_line;

/// `axle sidecar` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The application's base URL, `http://127.0.0.1:PORT` (default: [sidecar] app).
    #[arg(long)]
    app: Option<String>,
    /// The manifest: [sidecar.provides], the services called, governance, trust.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Where Axle callers reach the provided services (default 127.0.0.1:0: a free port,
    /// printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Where the application calls other services over HTTP (default: [sidecar] local,
    /// else 127.0.0.1:0). Loopback only: calls through it are internal.
    #[arg(long)]
    local: Option<String>,
    /// The address consumers dial (default: the listening address).
    #[arg(long)]
    advertise: Option<String>,
    /// Lease time-to-live of the registration (s) (default: [discovery] lease-ttl-s).
    #[arg(long)]
    lease_ttl_s: Option<u64>,
    /// How long to wait for requests in flight when stopping (ms).
    #[arg(long, default_value_t = 5000)]
    drain_ms: u64,
    #[command(flatten)]
    server_tls: super::tls::ServerTlsArgs,
    #[command(flatten)]
    client_tls: super::tls::ClientTlsArgs,
    #[command(flatten)]
    discovery: super::discovery::Args,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut stop = super::serve::StopSignal::listen();
    let mut manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    args.server_tls.apply(&mut manifest)?;
    args.client_tls.apply(&mut manifest);
    // Only a sidecar that provides services forwards to its application.
    let app = match args.app.clone().or(manifest.sidecar.app.clone()) {
        Some(url) => Some(App::new(&url)?),
        None if manifest.sidecar.provides.is_empty() => None,
        None => anyhow::bail!(
            "[sidecar.provides] names services: say where the application is, --app http://127.0.0.1:PORT"
        ),
    };
    let registry = args.discovery.registry(&manifest)?;
    let backend = match &registry {
        RegistryUrl::Etcd(_) if !manifest.sidecar.provides.is_empty() => {
            let mut options = manifest.backend_options();
            if let Some(ttl) = args.lease_ttl_s {
                anyhow::ensure!(
                    (1..=3600).contains(&ttl),
                    "--lease-ttl-s must be 1..=3600 (got {ttl})"
                );
                options.lease_ttl = Duration::from_secs(ttl);
            }
            Some(axle::discovery::open(&registry, options)?)
        }
        _ => None,
    };
    let host = Arc::new(PluginHost::with_default_cache()?);

    // The consumer side first: the application may call out while it warms up.
    let services: Vec<String> = axle_gateway::services(&manifest).into_iter().collect();
    let (client, _follows) = super::gateway::client(
        &host,
        &manifest,
        args.manifest.as_deref(),
        &args.discovery,
        &services,
    )
    .await?;
    let local_addr = args
        .local
        .clone()
        .or(manifest.sidecar.local.clone())
        .unwrap_or_else(|| "127.0.0.1:0".to_string());
    let local = HttpListener::bind(&local_addr, Arc::new(Forwarder::local(client, &manifest)))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {local_addr}: {e}"))?;
    anyhow::ensure!(
        local.local_addr().ip().is_loopback(),
        "--local {local_addr}: calls through it are internal, so it listens on loopback only"
    );
    print_line(&format!("local on {}", local.local_addr()));

    let Some(app) = app.filter(|_| !manifest.sidecar.provides.is_empty()) else {
        stop.wait().await;
        local.shutdown(Duration::from_millis(args.drain_ms)).await;
        print_line("stopped");
        return Ok(ExitCode::SUCCESS);
    };

    // The provider side: ready when the application's health URL answers.
    let ready_app = app.clone();
    let (health_path, ready_timeout) = (
        manifest.sidecar.health_path.clone(),
        manifest.sidecar.ready_timeout,
    );
    let builder = ServerBuilder::new()
        .with_manifest(&host, &manifest)?
        .readiness(async move { ready_app.wait_healthy(&health_path, ready_timeout).await });
    let builder = sidecar::provide(builder, &app, &manifest.sidecar.provides);
    let mut server = builder
        .bind(&args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    print_line(&format!("listening on {}", server.local_addr()));
    // Inside-out: the application healthy, then visible. A stop signal meanwhile stops.
    let exposed = async {
        match &backend {
            Some(backend) => {
                let instance = Provider::new(match &args.advertise {
                    Some(a) => a.clone(),
                    None => server.local_addr().to_string(),
                });
                let namespace = args.discovery.namespace(&manifest);
                let keys = server
                    .services()
                    .iter()
                    .map(|s| {
                        ServiceKey::new(&namespace, s, &args.discovery.groups(&manifest, s).primary)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let timeout = ready_timeout + Duration::from_secs(1);
                Ok::<_, anyhow::Error>(
                    axle::exposure::register(
                        &mut server,
                        backend.as_ref(),
                        &keys,
                        instance,
                        timeout,
                    )
                    .await?,
                )
            }
            None => {
                server
                    .ready(ready_timeout + Duration::from_secs(1))
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?;
                Ok(Vec::new())
            }
        }
    };
    let outcome = tokio::select! {
        r = exposed => Some(r),
        _ = stop.wait() => None,
    };
    let failed = match outcome {
        Some(Ok(keys)) => {
            for key in keys {
                print_line(&format!("registered {key}"));
            }
            print_line("ready");
            stop.wait().await;
            None
        }
        Some(Err(e)) => Some(e),
        None => None,
    };
    // Outside-in: deregister, refuse new requests, drain those in flight (the
    // application's own outbound calls still work meanwhile), then the local listener.
    let drain = Duration::from_millis(args.drain_ms);
    server.shutdown(drain).await;
    local.shutdown(drain).await;
    print_line("stopped");
    match failed {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
