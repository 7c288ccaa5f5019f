//! The consumer's discovery flags, shared by `axle call` and `axle demo`.

use std::sync::Arc;
use std::time::Duration;

use axle::client::Client;
use axle::discovery::config::Groups;
use axle::discovery::follow::Follow;
use axle::discovery::rules::Rules;
use axle::discovery::{Backend, RegistryUrl, ServiceKey};
use axle::manifest::Manifest;

use super::rules_follow::{RuleBase, RuleFollow};

/// How a consumer finds providers (default: the manifest's [discovery] table).
#[derive(clap::Args, Clone, Debug)]
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
    /// This consumer's application, registered with it on etcd (`axle consumers`).
    /// (`--consumer-app`: `axle sidecar`'s `--app` is the application's URL.)
    #[arg(long, default_value = "axle")]
    pub consumer_app: String,
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

    /// Follows `services` through `backend` into `client`, registered as a consumer of
    /// each where the registry keeps consumers (etcd); waits (bounded) for each first
    /// listing. On etcd it also applies and follows each service's run-time rule, laid
    /// over `rules` (`rules_follow`). [`stop`] the result to deregister at once.
    pub async fn follow(
        &self,
        manifest: &Manifest,
        rules: RuleBase,
        backend: &Arc<dyn Backend>,
        client: &Client,
        services: &[&str],
    ) -> anyhow::Result<Follows> {
        let registry = self.registry(manifest)?;
        let rules = match registry {
            RegistryUrl::Etcd(_) => {
                let store = Rules::open(
                    &registry,
                    manifest.backend_options(),
                    &self.namespace(manifest),
                )?;
                let base = Arc::new(rules);
                Some(super::rules_follow::start(base, store, client, manifest, services).await?)
            }
            _ => None,
        };
        let mut follows = Vec::new();
        for service in services {
            let groups = self.groups(manifest, service);
            let key = ServiceKey::new(&self.namespace(manifest), service, &groups.primary)?;
            let mut f = Follow::start(
                Arc::new(client.clone()),
                backend.as_ref(),
                &key.namespace,
                service,
                groups,
                manifest.discovery.warmup(),
                Duration::from_millis(250),
            )?;
            f.register_consumer(backend.as_ref(), &key, &self.consumer_app)
                .await;
            if !f.synced(Duration::from_secs(3)).await {
                tracing::warn!(
                    service,
                    registry = backend.describe(),
                    "no listing from the registry yet; calls fail until one arrives"
                );
            }
            follows.push(f);
        }
        Ok(Follows {
            services: follows,
            rules,
        })
    }
}

/// What a consumer follows: each service's providers, and on etcd their rules.
#[derive(Default)]
pub struct Follows {
    services: Vec<Follow>,
    rules: Option<RuleFollow>,
}

/// The backend for a consumer.
pub fn open(url: &RegistryUrl, manifest: &Manifest) -> anyhow::Result<Arc<dyn Backend>> {
    Ok(axle::discovery::open(url, manifest.backend_options())?)
}

/// Stops following and removes the consumer registrations (a process that exits without
/// this leaves them until their lease runs out).
pub async fn stop(follows: Follows) {
    drop(follows.rules);
    for f in follows.services {
        f.stop().await;
    }
}
