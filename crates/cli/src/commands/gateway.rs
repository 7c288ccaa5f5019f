//! `axle gateway`: HTTP/1.1 and HTTP/2 in front of Axle services. Each request is one
//! call through the same client `axle call` builds (plugins, governance, health,
//! discovery with `--registry`), marked external; `docs/gateway.md` has the routes,
//! headers and the status of each error class.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axle::client::{Client, ClientConfig};
use axle::discovery::RegistryUrl;
use axle::manifest::Manifest;
use axle::plugin::PluginHost;
use axle_gateway::{ClientLimiter, Forwarder, HttpListener};

use super::discovery::Follows;
use super::rules_follow::RuleBase;

/// `axle gateway` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The manifest: services, routes ([gateway.routes]), limits ([gateway]).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Where to listen for HTTP (default: [gateway] listen, else 127.0.0.1:8080). Port 0
    /// picks a free port; the chosen address is printed.
    #[arg(long)]
    listen: Option<String>,
    /// How long to wait for requests in flight when stopping (ms).
    #[arg(long, default_value_t = 5000)]
    drain_ms: u64,
    #[command(flatten)]
    tls: super::tls::ClientTlsArgs,
    #[command(flatten)]
    discovery: super::discovery::Args,
    /// The admin endpoint: `axle stats --admin ADDR` shows the gateway's client (its
    /// endpoints, plugins and run-time rules).
    #[command(flatten)]
    admin: super::admin::AdminArgs,
}

/// Where `axle gateway` listens without `--listen` or [gateway] listen.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut stop = super::serve::StopSignal::listen();
    let mut manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    args.tls.apply(&mut manifest);
    let host = Arc::new(PluginHost::with_default_cache()?);
    let services: Vec<String> = axle_gateway::services(&manifest).into_iter().collect();
    let manifest_path = args.manifest.as_deref();
    let (client, follows) =
        client(&host, &manifest, manifest_path, &args.discovery, &services).await?;
    let limiter = ClientLimiter::from_manifest(&host, &manifest)?;
    let admin = args
        .admin
        .start(axle::admin::Admin::new().client("gateway", client.clone()))
        .await?;
    let forwarder = Arc::new(Forwarder::gateway(client, &manifest, limiter));
    let listen = args
        .listen
        .or(manifest.gateway.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listener = HttpListener::bind(&listen, forwarder)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    print_line(&format!("listening on {}", listener.local_addr()));
    if let Some(a) = &admin {
        print_line(&format!("admin on {}", a.local_addr()));
        a.set_ready(true);
    }
    stop.wait().await;
    if let Some(a) = admin {
        a.shutdown(Duration::ZERO).await;
    }
    listener
        .shutdown(Duration::from_millis(args.drain_ms))
        .await;
    super::discovery::stop(follows).await;
    Ok(ExitCode::SUCCESS)
}

/// The client `axle call` builds, for every service in `services`: the manifest's
/// endpoints, or the registry's providers followed for as long as the `Follow`s live.
/// Run-time rules are checked against `manifest_path`'s layers.
pub async fn client(
    host: &Arc<PluginHost>,
    manifest: &Manifest,
    manifest_path: Option<&Path>,
    discovery: &super::discovery::Args,
    services: &[String],
) -> anyhow::Result<(Client, Follows)> {
    let registry = discovery.registry(manifest)?;
    let discover = registry != RegistryUrl::Static;
    let mut config = ClientConfig::new(manifest.clone());
    for service in services {
        if discover || !manifest.endpoints.contains_key(service) {
            config = config.endpoints(service, Vec::new());
        }
    }
    let client = Client::new(host, config)?;
    let follows = if discover {
        let backend = super::discovery::open(&registry, manifest)?;
        let names: Vec<&str> = services.iter().map(String::as_str).collect();
        let base = RuleBase::new(host.clone(), manifest_path)?;
        discovery
            .follow(manifest, base, &backend, &client, &names)
            .await?
    } else {
        Follows::default()
    };
    Ok((client, follows))
}

/// One line on stdout, flushed (scripts and tests wait for it); a reader that went away
/// is no reason to stop.
pub(crate) fn print_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
