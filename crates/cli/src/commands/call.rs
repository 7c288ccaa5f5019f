//! `axle call SERVICE/METHOD JSON`: one call through the full client pipeline, the JSON
//! answer on stdout; on failure exit 3 naming the error class. Exit 2 stays clap's (bad
//! flags), so a script tells "the call failed" from "the command was wrong".

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axle::client::{CallOptions, Client, ClientConfig};
use axle::discovery::RegistryUrl;
use axle::manifest::{EndpointSpec, Manifest};
use axle::payload;
use axle::plugin::PluginHost;

/// Exit status of a call that was made and failed (or found no provider to make it to).
pub const CALL_FAILED: u8 = 3;

/// `axle call` flags.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 the call answered (the JSON is on stdout); 1 the command could not run (a bad manifest, request or flag value); 2 usage error (unknown or missing flags); 3 the call failed (stderr names the error class: business, rate_limited, deadline_exceeded, transport, no_endpoint, ...)."
)]
pub struct Args {
    #[command(flatten)]
    tls: super::tls::ClientTlsArgs,
    /// `service/method`.
    target: String,
    /// The request, as JSON.
    json: String,
    /// The manifest (default: the one embedded in the binary).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Call this endpoint instead of the manifest's (repeatable).
    #[arg(long = "endpoint")]
    endpoints: Vec<String>,
    /// The call's whole budget (ms).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// A request tag `key=value` (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Mark the request as coming from outside (internal-only methods refuse it).
    #[arg(long)]
    external: bool,
    #[command(flatten)]
    discovery: super::discovery::Args,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (service, method) = args
        .target
        .split_once('/')
        .filter(|(s, m)| !s.is_empty() && !m.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the target is SERVICE/METHOD, got `{}`", args.target))?;
    let json: serde_json::Value = serde_json::from_str(&args.json)
        .map_err(|e| anyhow::anyhow!("the request is not JSON: {e}"))?;
    let mut manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    args.tls.apply(&mut manifest);
    let registry = args.discovery.registry(&manifest)?;
    // --endpoint wins; a registry other than the manifest's list is followed.
    let discover = args.endpoints.is_empty() && registry != RegistryUrl::Static;
    let mut config = ClientConfig::new(manifest.clone());
    if !args.endpoints.is_empty() {
        config = config.endpoints(service, args.endpoints.iter().map(EndpointSpec::new));
    } else if discover {
        config = config.endpoints(service, Vec::new());
    }
    let host = std::sync::Arc::new(PluginHost::with_default_cache()?);
    let client = Client::new(&host, config)?;
    let follows = if discover {
        let backend = super::discovery::open(&registry, &manifest)?;
        let base = super::rules_follow::RuleBase::new(host.clone(), args.manifest.as_deref())?;
        let follows = args
            .discovery
            .follow(&manifest, base, &backend, &client, &[service])
            .await?;
        if client.admissible(service) == 0 {
            let g = args.discovery.groups(&manifest, service);
            eprintln!(
                "axle: call failed: no_endpoint: no providers of `{service}` in group `{}`{} of namespace `{}` at {}",
                g.primary,
                g.secondary.map(|s| format!(" or `{s}`")).unwrap_or_default(),
                args.discovery.namespace(&manifest),
                backend.describe()
            );
            super::discovery::stop(follows).await;
            return Ok(ExitCode::from(CALL_FAILED));
        }
        follows
    } else {
        Default::default()
    };
    let mut options = CallOptions {
        timeout: args.timeout_ms.map(Duration::from_millis),
        external: args.external,
        ..CallOptions::default()
    };
    for tag in &args.tags {
        let (k, v) = tag
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--tag takes key=value, got `{tag}`"))?;
        options = options.tag(k, v);
    }
    let value = payload::to_value(&json).map_err(|e| anyhow::anyhow!("{e}"))?;
    let answer = client
        .call_value_at(service, method, &value, &options)
        .await;
    super::discovery::stop(follows).await;
    match answer {
        Ok(answer) => {
            let json = payload::to_json(&answer.value).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{json}");
            if answer.fallback {
                eprintln!("axle: (the method's fallback answered: the call itself failed)");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // A remote error's text starts with its class already.
            match &e {
                axle::client::CallError::Remote { .. } => eprintln!("axle: call failed: {e}"),
                _ => eprintln!("axle: call failed: {}: {e}", e.class()),
            }
            Ok(ExitCode::from(CALL_FAILED))
        }
    }
}
