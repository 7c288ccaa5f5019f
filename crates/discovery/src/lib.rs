//! Discovery: where a service's providers are, and how a provider says it is one.
//!
//! Three backends behind one [`Backend`] trait, chosen by a registry URL:
//!
//! | URL | backend | file |
//! |---|---|---|
//! | `static` (default) | the manifest's `[services.<s>] endpoints` | `static_list.rs` |
//! | `file:PATH` | a TOML file in the same syntax, re-read when it changes | `file.rs` |
//! | `etcd://HOST:PORT[,HOST:PORT...]` | etcd (cargo feature `etcd`) | `etcd.rs` |
//!
//! The discovery key is *namespace + service + group*: an environment (namespace) is a
//! separate key space, and a group (a business line, a blue/green half) is part of the
//! key, so a consumer of group `blue` never sees `green` providers unless it names `green`
//! as its secondary group ([`follow`]).
//!
//! Providers register an [`Provider`] (address plus metadata: weight, tags, zone, start
//! time, warm-up, version); consumers [`Backend::subscribe`] to a key and always hold the
//! latest [`Listing`]. Backends that can fail (etcd) keep the last good snapshot while
//! they cannot reach their source, so callers go on serving from it.
//!
//! What etcd returns is not trusted as is: every entry is checked ([`admit`]: size, address,
//! tags, optional allowed address ranges, a cap on providers per key) and a bad one is
//! skipped with a rate-limited warning and counted in [`Listing::skipped`], never dialled.
//! etcd itself can be reached over TLS, with a client certificate and with a user and
//! password (`[discovery.etcd]`, [`config::EtcdConfig`]).

pub mod admit;
pub mod config;
pub mod consumer;
pub mod defaults;
#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "etcd")]
mod etcd_consumers;
#[cfg(feature = "etcd")]
mod etcd_lease;
#[cfg(feature = "etcd")]
mod etcd_rules;
pub mod file;
pub mod follow;
pub mod revisions;
pub mod rules;
pub mod static_list;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use axle_core::EndpointSpec;

pub use config::{DiscoveryConfig, EtcdConfig};
pub use consumer::{Consumer, ConsumerListing};

/// What went wrong in discovery. Every message names the registry or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A registry URL that cannot be used.
    #[error("registry `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    /// A service, group or namespace name that cannot be part of a key.
    #[error("{reason}")]
    BadName {
        what: &'static str,
        value: String,
        reason: String,
    },
    /// The backend cannot take registrations (the static list, a file).
    #[error("{backend} is read-only: providers are listed in it, they cannot register")]
    ReadOnly { backend: String },
    /// The registry did not answer or refused.
    #[error("{backend}: {reason}")]
    Unavailable { backend: String, reason: String },
    /// The application's readiness hook said the service is not ready.
    #[error("the service did not become ready: {0}")]
    NotReady(String),
}

/// The discovery key: which providers a consumer wants, which a provider is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceKey {
    /// The environment: separate namespaces never see each other's providers.
    pub namespace: String,
    pub service: String,
    pub group: String,
}

impl ServiceKey {
    /// A key, with every part checked (no `/`, not empty, printable ASCII), since the
    /// parts become path segments of a registry key.
    pub fn new(namespace: &str, service: &str, group: &str) -> Result<ServiceKey, DiscoveryError> {
        check_name("namespace", namespace)?;
        check_name("service", service)?;
        check_name("group", group)?;
        Ok(ServiceKey {
            namespace: namespace.to_string(),
            service: service.to_string(),
            group: group.to_string(),
        })
    }
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.service, self.group)
    }
}

/// Checks one part of a discovery key (the kernel's one name rule).
pub fn check_name(what: &'static str, value: &str) -> Result<(), DiscoveryError> {
    axle_core::validate::name(what, value).map_err(|reason| DiscoveryError::BadName {
        what,
        value: value.to_string(),
        reason,
    })
}

/// One provider instance as registered: where it is and what consumers should know.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provider {
    /// `host:port` consumers dial.
    pub address: String,
    /// Configured relative weight (before warm-up and health).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Tags for routers (lane, version, ...).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Where it runs (also a tag `zone` for routers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// When it became ready and registered (ms since the Unix epoch): the start of its
    /// warm-up. `None` (a static list) means "has always been there", full weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    /// The provider's own warm-up period (ms); consumers use theirs when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_ms: Option<u64>,
    /// The provider's software version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

fn default_weight() -> u32 {
    axle_core::endpoint::DEFAULT_WEIGHT
}

impl Provider {
    /// An instance at `address` with the default weight, started now.
    pub fn new(address: impl Into<String>) -> Provider {
        Provider {
            address: address.into(),
            weight: default_weight(),
            tags: BTreeMap::new(),
            zone: None,
            start_ms: Some(unix_ms()),
            warmup_ms: None,
            version: None,
        }
    }

    /// The endpoint a client dials: address, weight and tags (zone and version become
    /// tags too, so routers can use them).
    pub fn endpoint_spec(&self) -> EndpointSpec {
        let mut tags = self.tags.clone();
        if let Some(zone) = &self.zone {
            tags.entry("zone".into()).or_insert_with(|| zone.clone());
        }
        if let Some(v) = &self.version {
            tags.entry("version".into()).or_insert_with(|| v.clone());
        }
        EndpointSpec {
            address: self.address.clone(),
            weight: self.weight,
            tags: tags.into_iter().collect(),
        }
    }

    /// Parses a registered value, rejecting what a consumer could not dial.
    pub fn decode(bytes: &[u8]) -> Result<Provider, String> {
        let i: Provider = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        check_address(&i.address)?;
        Ok(i)
    }

    /// The value a backend stores.
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings and integers always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

pub use axle_core::validate::address as check_address;

/// Milliseconds since the Unix epoch (wall clock: start times cross processes).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a consumer knows about one discovery key.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The registry's revision this set is consistent with (0: never listed). Events at
    /// or below it are stale and discarded.
    pub revision: i64,
    /// The providers, by address order.
    pub instances: Arc<Vec<Provider>>,
    /// Whether the last attempt to reach the registry worked. While it is false the set
    /// is the cached one.
    pub connected: bool,
    /// Full listings applied so far (the "pull" side).
    pub lists: u64,
    /// Why the registry could not be reached, when it could not.
    pub error: Option<String>,
    /// Registry entries skipped so far as invalid or over a cap (each key revision once):
    /// never dialled.
    pub skipped: u64,
    /// The last skipped entry and why (`key: reason`, shortened).
    pub last_skipped: Option<String>,
}

/// A registration that stays in force until [`Registration::deregister`] (or the
/// process dies, and the backend's lease runs out).
pub struct Registration {
    key: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Registration {
    /// A registration that holds nothing (the static list: nothing to undo).
    pub fn none(key: impl Into<String>) -> Registration {
        Registration {
            key: key.into(),
            stop: None,
            task: None,
        }
    }

    /// A registration kept alive by `task`, which removes it when `stop` fires.
    pub fn with_task(
        key: String,
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    ) -> Registration {
        Registration {
            key,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The registry key (for messages).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Removes the registration and waits (bounded by the backend) until it is gone.
    pub async fn deregister(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Dropped without deregister(): stop the keepalive; the lease then runs out.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A discovery backend.
pub trait Backend: Send + Sync {
    /// For messages: `etcd://127.0.0.1:2379`, `file:/etc/axle/providers.toml`, `static`.
    fn describe(&self) -> String;

    /// Publishes `instance` under `key`; resolves once it is visible to consumers. By
    /// default a backend only lists providers (static, file) and refuses.
    fn register(
        &self,
        _key: &ServiceKey,
        _instance: &Provider,
    ) -> BoxFuture<'static, Result<Registration, DiscoveryError>> {
        let backend = self.describe();
        Box::pin(async move { Err(DiscoveryError::ReadOnly { backend }) })
    }

    /// The providers of `key`, kept current for as long as a receiver lives.
    fn subscribe(&self, key: &ServiceKey) -> watch::Receiver<Listing>;

    /// Registers this process as a consumer of `key` for `application` (`consumer.rs`);
    /// `None` where the backend keeps no consumers (static, file): there is nowhere to
    /// say it, and following works the same.
    fn register_consumer(
        &self,
        _key: &ServiceKey,
        _application: &str,
    ) -> BoxFuture<'static, Result<Option<Registration>, DiscoveryError>> {
        Box::pin(async { Ok(None) })
    }

    /// The consumers registered for `key`. Only a shared registry (etcd) keeps them.
    fn consumers(
        &self,
        _key: &ServiceKey,
    ) -> BoxFuture<'static, Result<ConsumerListing, DiscoveryError>> {
        let backend = self.describe();
        Box::pin(async move {
            Err(DiscoveryError::Unavailable {
                backend,
                reason: "keeps no consumers (only an etcd:// registry does)".into(),
            })
        })
    }
}

/// A parsed registry URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryUrl {
    /// The manifest's endpoint lists.
    Static,
    /// A watched TOML file.
    File(std::path::PathBuf),
    /// etcd at these `host:port`s.
    Etcd(Vec<String>),
}

impl RegistryUrl {
    /// `static`, `file:PATH` (or `file://PATH`), `etcd://HOST:PORT[,HOST:PORT...]`.
    pub fn parse(url: &str) -> Result<RegistryUrl, DiscoveryError> {
        let bad = |reason: String| DiscoveryError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let url = url.trim();
        if url == "static" || url == "manifest" {
            return Ok(RegistryUrl::Static);
        }
        if let Some(path) = url.strip_prefix("file:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(bad(
                    "file: needs a path (file:/etc/axle/providers.toml)".into()
                ));
            }
            return Ok(RegistryUrl::File(path.into()));
        }
        if let Some(rest) = url.strip_prefix("etcd://") {
            let rest = rest.trim_end_matches('/');
            if rest.is_empty() {
                return Err(bad("etcd:// needs HOST:PORT (etcd://127.0.0.1:2379)".into()));
            }
            let mut hosts = Vec::new();
            for h in rest.split(',') {
                if h.contains('/') || h.contains('?') {
                    return Err(bad(format!(
                        "`{h}`: only HOST:PORT[,HOST:PORT] after etcd:// (the namespace is --namespace or [discovery] namespace)"
                    )));
                }
                check_address(h).map_err(bad)?;
                hosts.push(h.to_string());
            }
            return Ok(RegistryUrl::Etcd(hosts));
        }
        Err(bad(
            "expected `static`, `file:PATH` or `etcd://HOST:PORT[,HOST:PORT]`".into(),
        ))
    }
}

/// Parses a providers file into endpoint lists per service (see [`BackendOptions`]).
pub type ParseEndpoints =
    fn(text: &str, file: &str, base: &Path) -> Result<BTreeMap<String, Vec<EndpointSpec>>, String>;

/// Everything a backend may need from its environment.
pub struct BackendOptions {
    /// Reads a providers file (`file:` registries): its text, its name for messages, the
    /// folder relative paths start from. The manifest crate hands its own parser in, so
    /// a providers file has the manifest's syntax without discovery depending on it.
    pub parse_endpoints: ParseEndpoints,
    /// The manifest's endpoints (the static backend).
    pub manifest_endpoints: BTreeMap<String, Vec<EndpointSpec>>,
    /// Lease time-to-live of registrations (etcd).
    pub lease_ttl: Duration,
    /// How often consumers re-list ("pull is the truth").
    pub resync: Duration,
    /// How often a watched file is checked.
    pub file_poll: Duration,
    /// How etcd is reached (TLS, credentials) and what is accepted from it.
    pub etcd: EtcdConfig,
}

/// The backend a URL names. Must run inside a tokio runtime (backends spawn tasks).
pub fn open(
    url: &RegistryUrl,
    options: BackendOptions,
) -> Result<Arc<dyn Backend>, DiscoveryError> {
    match url {
        RegistryUrl::Static => Ok(Arc::new(static_list::StaticList::new(
            options.manifest_endpoints,
        ))),
        RegistryUrl::File(path) => Ok(Arc::new(file::WatchedFile::new(
            path.clone(),
            options.file_poll,
            options.parse_endpoints,
        ))),
        #[cfg(feature = "etcd")]
        RegistryUrl::Etcd(hosts) => Ok(Arc::new(etcd::Etcd::new(hosts.clone(), options)?)),
        #[cfg(not(feature = "etcd"))]
        RegistryUrl::Etcd(hosts) => Err(DiscoveryError::BadUrl {
            url: format!("etcd://{}", hosts.join(",")),
            reason: "this axle was built without etcd support (build with `--features etcd`)"
                .into(),
        }),
    }
}

/// The warm-up factor of an endpoint (1..=1000 permille; 1000 = full weight): a linear
/// ramp from its start time over `warmup`, as Dubbo does (`uptime / warmup`, never
/// below 1 so a new endpoint gets some traffic and proves itself). No start time or no
/// warm-up: full weight. A start time in the future (clock skew) counts as just started.
pub fn warmup_permille(start_ms: Option<u64>, warmup: Duration, now_ms: u64) -> u32 {
    let (Some(start), w) = (start_ms, warmup.as_millis() as u64) else {
        return 1000;
    };
    if w == 0 {
        return 1000;
    }
    let up = now_ms.saturating_sub(start);
    if up >= w {
        return 1000;
    }
    ((up * 1000 / w) as u32).clamp(1, 1000)
}

#[cfg(test)]
mod tests;
