//! `axle serve`: hosts the built-in services (echo, flaky, kv) through the provider
//! pipeline, until SIGTERM or Ctrl-C, then stops outside-in.
//!
//! With a registry that takes registrations (`--registry etcd://...`) it starts
//! inside-out: plugins loaded, listening, ready (`--ready-delay-ms` stands in for an
//! application's warm-up), then registered — one `registered KEY` line per service.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axle::discovery::{Provider, RegistryUrl, ServiceKey};
use axle::manifest::Manifest;
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
    #[command(flatten)]
    tls: super::tls::ServerTlsArgs,
    /// Register with this registry: `etcd://HOST:PORT[,HOST:PORT]` (default: the
    /// manifest's [discovery] registry; `static` and `file:` registries list providers
    /// instead, so nothing is registered with them).
    #[arg(long)]
    registry: Option<String>,
    /// The discovery namespace (environment) (default: [discovery] namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// The group to register in (default: [discovery] group).
    #[arg(long)]
    group: Option<String>,
    /// The weight consumers give this provider once warm.
    #[arg(long, default_value_t = axle::manifest::defaults::ENDPOINT_WEIGHT)]
    weight: u32,
    /// A tag `key=value` consumers' routers see (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// The zone this provider runs in (also a `zone` tag).
    #[arg(long)]
    zone: Option<String>,
    /// This provider's version (also a `version` tag).
    #[arg(long)]
    app_version: Option<String>,
    /// Advertise this warm-up period (ms) to consumers (default: theirs).
    #[arg(long)]
    warmup_ms: Option<u64>,
    /// Lease time-to-live of the registration (s) (default: [discovery] lease-ttl-s).
    #[arg(long)]
    lease_ttl_s: Option<u64>,
    /// The address consumers dial (default: the listening address; required when
    /// listening on 0.0.0.0 or [::]).
    #[arg(long)]
    advertise: Option<String>,
    /// Wait this long after listening before the service counts as ready (a stand-in for
    /// an application's own warm-up; registration waits for it).
    #[arg(long, default_value_t = 0)]
    ready_delay_ms: u64,
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
    let mut stop = StopSignal::listen();
    let mut manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    args.tls.apply(&mut manifest)?;
    // One descriptor per connection: the soft limit (often 1,024) would refuse connections
    // long before `max-connections`.
    if let Some(limit) = axle::core::descriptors::raise_descriptor_limit() {
        let cap = manifest.serve.limits.max_connections as u64;
        if limit < cap + 64 {
            tracing::warn!(
                "the descriptor limit ({limit}) is below max-connections ({cap}): connections past it are refused by the system"
            );
        }
    }
    let flaky = flaky(manifest.serve.flaky, &args);
    flaky
        .validate()
        .map_err(|e| anyhow::anyhow!("--flaky-*: {e}"))?;
    let registry = match &args.registry {
        Some(url) => RegistryUrl::parse(url)?,
        None => manifest.discovery.registry.clone(),
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| manifest.discovery.namespace.clone());
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| manifest.discovery.groups.primary.clone());
    let mut instance = Provider::new("");
    instance.weight = args.weight;
    instance.zone = args.zone.clone();
    instance.version = args.app_version.clone();
    instance.warmup_ms = args.warmup_ms;
    for tag in &args.tags {
        let (k, v) = tag
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| anyhow::anyhow!("--tag takes key=value, got `{tag}`"))?;
        instance.tags.insert(k.to_string(), v.to_string());
    }
    if let Some(ttl) = args.lease_ttl_s {
        anyhow::ensure!(
            (1..=3600).contains(&ttl),
            "--lease-ttl-s must be 1..=3600 (got {ttl})"
        );
    }
    // The registry is opened (and a bad one refused) before anything listens.
    let backend = match &registry {
        RegistryUrl::Etcd(_) => {
            let mut options = manifest.backend_options();
            if let Some(ttl) = args.lease_ttl_s {
                options.lease_ttl = Duration::from_secs(ttl);
            }
            Some(axle::discovery::open(&registry, options)?)
        }
        _ => None,
    };
    let host = std::sync::Arc::new(crate::progress::plugin_host()?);
    let mut builder = ServerBuilder::new().with_manifest(&host, &manifest)?;
    if args.ready_delay_ms > 0 {
        let delay = Duration::from_millis(args.ready_delay_ms);
        builder = builder.readiness(async move {
            tokio::time::sleep(delay).await;
            Ok(())
        });
    }
    let mut builder = services::register(builder, flaky);
    let limits = axle::wire::Limits {
        compression: manifest.compression(),
        ..axle::wire::Limits::default()
    };
    let limits = match args.max_frame_bytes {
        Some(max) => limits
            .with_max_frame(max)
            .map_err(|e| anyhow::anyhow!("--max-frame-bytes: {e}"))?,
        None => limits,
    };
    builder = builder.limits(limits);
    let listen = args
        .listen
        .or(manifest.serve.listen.clone())
        .unwrap_or_else(|| axle::manifest::defaults::LISTEN.to_string());
    let mut server = builder
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
    // The keys this kernel registers under: `stats` lists who calls them.
    let keys = server
        .services()
        .iter()
        .map(|s| ServiceKey::new(&namespace, s, &group))
        .collect::<Result<Vec<_>, _>>()?;
    // Providers per service, for a limiter sharing a cluster-wide rate (`cluster.rs`).
    let _cluster = crate::cluster::follow(host.cluster(), backend.as_ref(), &keys, &manifest);
    // Run-time limits: the `[limits]` of its services' rules, through etcd
    // (`serve_rules.rs`).
    let rule_book = axle::client::rules::RuleBook::default();
    let _limit_rules = match &registry {
        RegistryUrl::Etcd(_) => {
            let rules = axle::discovery::rules::Rules::open(
                &registry,
                manifest.backend_options(),
                &namespace,
            )?;
            let layered = Manifest::layered(args.manifest.as_deref())?;
            let services = server.services().to_vec();
            Some(
                super::serve_rules::start(
                    swapper.clone(),
                    rules,
                    layered,
                    manifest.clone(),
                    services,
                    rule_book.clone(),
                )
                .await?,
            )
        }
        _ => None,
    };
    let mut admin = axle::admin::Admin::new()
        .server("serve", &server)
        .swapper(swapper);
    if _limit_rules.is_some() {
        admin = admin.server_rules(rule_book);
    }
    if let Some(backend) = &backend {
        admin = admin.consumers(axle::admin::ConsumerSource::new(
            backend.clone(),
            keys.clone(),
        ));
    }
    let admin = args.admin.start(admin).await?;
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
    use std::io::Write;
    if let RegistryUrl::Etcd(_) = registry {
        instance.address = match &args.advertise {
            Some(a) => {
                axle::discovery::check_address(a)
                    .map_err(|e| anyhow::anyhow!("--advertise: {e}"))?;
                a.clone()
            }
            None if server.local_addr().ip().is_unspecified() => anyhow::bail!(
                "listening on {}: say which address consumers dial with --advertise HOST:PORT",
                server.local_addr()
            ),
            None => server.local_addr().to_string(),
        };
        let Some(backend) = &backend else {
            anyhow::bail!("no registry backend for {registry:?}");
        };
        let ready_timeout = Duration::from_millis(manifest.discovery.ready_timeout_ms);
        // Start inside-out: ready first, then visible. A stop signal meanwhile stops.
        let registered = tokio::select! {
            r = axle::exposure::register(&mut server, backend.as_ref(), &keys, instance, ready_timeout) => r?,
            _ = stop.wait() => {
                server.shutdown(Duration::from_millis(args.drain_ms)).await;
                return Ok(ExitCode::SUCCESS);
            }
        };
        for key in registered {
            println!("registered {key}");
        }
        let _ = std::io::stdout().flush();
    } else if args.registry.is_some() {
        tracing::info!("{registry:?} lists providers; nothing to register with it");
    }
    // Serving and, where it registers, registered: `/readyz` says so.
    if let Some(a) = &admin {
        a.set_ready(true);
    }
    stop.wait().await;
    tracing::info!("stopping: draining requests in flight");
    if let Some(a) = admin {
        a.shutdown(Duration::ZERO).await;
    }
    let observer = server.observer();
    server.shutdown(Duration::from_millis(args.drain_ms)).await;
    // What ran and what was refused, for whoever stopped it (and the stop tests, which
    // count executions here against answers on the caller).
    let stats = observer.stats();
    let handled: u64 = stats.methods.iter().map(|m| m.handled).sum();
    let refused: u64 = stats
        .methods
        .iter()
        .map(|m| m.errors.get("shutting_down").copied().unwrap_or(0))
        .sum::<u64>()
        + stats.refused_closing;
    println!("stopped: {handled} handled, {refused} refused while stopping");
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM and Ctrl-C, listened for from the start: a signal that arrives while the
/// server starts or registers (before anything awaits it) is kept, not lost — tokio only
/// reports signals to listeners that existed when they came.
pub(crate) struct StopSignal {
    #[cfg(unix)]
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignal {
    pub(crate) fn listen() -> StopSignal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signals = signal(SignalKind::terminate())
                .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)))
                .ok();
            StopSignal { signals }
        }
        #[cfg(not(unix))]
        StopSignal {}
    }

    /// Resolves at the first SIGTERM or Ctrl-C since [`StopSignal::listen`].
    pub(crate) async fn wait(&mut self) {
        #[cfg(unix)]
        if let Some((term, int)) = self.signals.as_mut() {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
