//! The consumer's discovery flags, shared by `axle call` and `axle demo`.

use std::sync::Arc;
use std::time::Duration;

use axle::client::Client;
use axle::discovery::config::Groups;
use axle::discovery::follow::Follow;
use axle::discovery::{Backend, RegistryUrl};
use axle::manifest::Manifest;

/// How a consumer finds providers (default: the manifest's [discovery] table).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Args {
    /// `static` (the manifest's endpoints), `file:PATH` or `etcd://HOST:PORT[,...]`.
    #[arg(long)]
    pub registry: Option<String>,
    /// The discovery namespace (environment).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The providers' group.
    #[arg(long)]
    pub group: Option<String>,
    /// A group used only while the primary group has no admissible endpoint.
    #[arg(long)]
    pub secondary_group: Option<String>,
}

impl Args {
    /// The registry to use.
    pub fn registry(&self, manifest: &Manifest) -> anyhow::Result<RegistryUrl> {
        Ok(match &self.registry {
            Some(url) => RegistryUrl::parse(url)?,
            None => manifest.discovery.registry.clone(),
        })
    }

    /// The namespace to use.
    pub fn namespace(&self, manifest: &Manifest) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| manifest.discovery.namespace.clone())
    }

    /// The groups `service` is followed in.
    pub fn groups(&self, manifest: &Manifest, service: &str) -> Groups {
        let mut g = manifest.discovery.groups_for(service);
        if let Some(p) = &self.group {
            g.primary = p.clone();
        }
        if let Some(s) = &self.secondary_group {
            g.secondary = Some(s.clone());
        }
        g
    }

    /// Follows `services` through `backend` into `client`; waits (bounded) for each
    /// first listing.
    pub async fn follow(
        &self,
        manifest: &Manifest,
        backend: &Arc<dyn Backend>,
        client: &Client,
        services: &[&str],
    ) -> anyhow::Result<Vec<Follow>> {
        let mut follows = Vec::new();
        for service in services {
            let f = Follow::start(
                Arc::new(client.clone()),
                backend.as_ref(),
                &self.namespace(manifest),
                service,
                self.groups(manifest, service),
                manifest.discovery.warmup(),
                Duration::from_millis(250),
            )?;
            if !f.synced(Duration::from_secs(3)).await {
                tracing::warn!(
                    service,
                    registry = backend.describe(),
                    "no listing from the registry yet; calls fail until one arrives"
                );
            }
            follows.push(f);
        }
        Ok(follows)
    }
}

/// The backend for a consumer.
pub fn open(url: &RegistryUrl, manifest: &Manifest) -> anyhow::Result<Arc<dyn Backend>> {
    Ok(axle::discovery::open(url, manifest.backend_options())?)
}
