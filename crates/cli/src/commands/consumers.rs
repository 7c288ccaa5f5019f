//! `axle consumers SERVICE`: who follows a service, read from the registry where every
//! consumer registers while it follows (etcd; see `axle_discovery::consumer`). Entries
//! that fail the checks are listed as skipped with the reason, never printed as they are.

use std::path::PathBuf;
use std::process::ExitCode;

use axle::discovery::{ConsumerListing, ServiceKey};
use axle::manifest::Manifest;

/// `axle consumers` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The service whose consumers are listed.
    service: String,
    /// The manifest ([discovery] and [discovery.etcd]; default: the embedded one).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// `etcd://HOST:PORT[,...]` (default: [discovery] registry).
    #[arg(long)]
    registry: Option<String>,
    /// The discovery namespace (default: [discovery] namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// The group the consumers follow (default: the service's group in the manifest).
    #[arg(long)]
    group: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    let registry = match &args.registry {
        Some(url) => axle::discovery::RegistryUrl::parse(url)?,
        None => manifest.discovery.registry.clone(),
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| manifest.discovery.namespace.clone());
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| manifest.discovery.groups_for(&args.service).primary);
    let key = ServiceKey::new(&namespace, &args.service, &group)?;
    let backend = super::discovery::open(&registry, &manifest)?;
    let listing = backend.consumers(&key).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        print!("{}", render(&listing));
    }
    Ok(ExitCode::SUCCESS)
}

/// The listing as a table, then the skipped entries.
fn render(l: &ConsumerListing) -> String {
    let mut out = format!(
        "consumers of {} (namespace {}, group {}): {}\n",
        l.service,
        l.namespace,
        l.group,
        l.consumers.len()
    );
    if !l.consumers.is_empty() {
        out += &format!(
            "{:<20} {:<40} {:<16} {:>8}  {}\n",
            "application", "id", "address", "pid", "since (ms since epoch)"
        );
    }
    for c in &l.consumers {
        out += &format!(
            "{:<20} {:<40} {:<16} {:>8}  {}\n",
            c.application, c.id, c.address, c.pid, c.start_ms
        );
    }
    for s in &l.skipped {
        out += &format!("skipped (invalid entry): {s}\n");
    }
    out
}
