//! The manifest (`plugins.toml`): which plugins exist, their config and limits, which
//! plugin fills each slot, by default and per service, governance tiers, endpoints and
//! discovery, parsed into the typed configs the crates below it take.
//!
//! A file is laid over the embedded defaults (and over the files it `extends`) as TOML
//! values before anything is read ([`layers`]), so a manifest holds only what differs.
//! Loading validates everything a later stage would trip over, and every error names the
//! file, the line and column, the key and the reason ([`locate`], [`suggest`]). Parsing is
//! split by table: `raw` (as written), `plugins` (`[plugins]`), `slots`, `endpoints`,
//! `serve`. Every default is indexed in [`defaults`]; [`schema`] describes every key.

mod check;
pub mod defaults;
mod endpoints;
mod gateway;
pub mod layers;
pub mod locate;
mod plugins;
mod raw;
pub mod rules;
pub mod rules_limits;
pub mod rules_route;
pub mod schema;
mod security;
mod serve;
pub mod shadow;
mod show;
mod slots;
pub mod suggest;
mod weights;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

pub use axle_core::EndpointSpec;
pub use axle_plugin_host::{ComponentSource, PluginKind, PluginSpec};
pub use endpoints::parse_endpoints;
pub use gateway::{GatewayRoute, GatewaySpec, SidecarSpec};
pub use security::{TlsSpec, TrustSpec};
pub use serve::{FlakyConfig, ServeSpec};
pub use slots::Slots;

pub use layers::Layered;
use locate::{LineCol, Seg};
use raw::RawManifest;

/// A validation failure before the file is known: (dotted key, reason).
pub(crate) type KeyError = (String, String);

/// A manifest that failed to load: where (file, line, column), which key, why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {key}: {reason}", self.place())]
pub struct ManifestError {
    /// The manifest file that wrote the value at fault (or `<embedded plugins.toml>`).
    pub file: String,
    /// The dotted key at fault (`plugins.rr.timeout-ms`), or `(file)`.
    pub key: String,
    /// What is wrong.
    pub reason: String,
    /// The 1-based line and column of the key in `file`, when it is written there.
    pub at: Option<LineCol>,
}

impl ManifestError {
    pub(crate) fn at(file: &str, key: &str, reason: String, at: Option<LineCol>) -> Self {
        ManifestError {
            file: file.to_string(),
            key: key.to_string(),
            reason,
            at,
        }
    }

    /// `file:line:column`, or `file` when the key is not written anywhere.
    pub fn place(&self) -> String {
        match self.at {
            Some((line, column)) => format!("{}:{line}:{column}", self.file),
            None => self.file.clone(),
        }
    }
}

/// A loaded, validated manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// `[serve]`.
    pub serve: ServeSpec,
    /// Where it came from (for messages).
    pub file: String,
    /// Every plugin, by name.
    pub plugins: BTreeMap<String, PluginSpec>,
    /// Default slot choices.
    pub slots: Slots,
    /// Per-service slot choices (override the defaults slot by slot).
    pub services: BTreeMap<String, Slots>,
    /// Per-service provider endpoints.
    pub endpoints: BTreeMap<String, Vec<EndpointSpec>>,
    /// `[services.<s>.weights]`: per service, endpoint address → the weight it takes,
    /// whatever discovery says (a run-time rule's `[weights]`).
    pub weight_overrides: BTreeMap<String, BTreeMap<String, u32>>,
    /// `[governance]`: the global tier.
    pub governance: axle_governance::TierSettings,
    /// `[services.<s>.governance]`: the service tier.
    pub service_governance: BTreeMap<String, axle_governance::TierSettings>,
    /// `[services.<s>.methods.<m>]`: the method tier.
    pub method_governance: BTreeMap<(String, String), axle_governance::TierSettings>,
    /// `[discovery]` and `[services.<s>.discovery]`: registry, namespace, groups, timings.
    pub discovery: axle_discovery::DiscoveryConfig,
    /// `[tls]`: TLS for the provider and the caller (plain TCP when absent).
    pub tls: TlsSpec,
    /// `[trust]`: which peers are inside the trust boundary (nobody by default).
    pub trust: TrustSpec,
    /// `[gateway]` and `[sidecar]`: the HTTP face (`axle gateway`, `axle sidecar`).
    pub gateway: GatewaySpec,
    pub sidecar: SidecarSpec,
}

/// The merged table as the manifest's tables; an error names the key path, and an unknown
/// name the nearest known one.
fn read_raw(table: &toml::Table) -> Result<RawManifest, (Vec<Seg>, String)> {
    serde_path_to_error::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                _ => None,
            })
            .collect();
        (
            path,
            suggest::unknown_name(e.into_inner().message().trim_end()),
        )
    })
}

/// Result caching is chosen per method: a cached answer skips the handler, which only an
/// idempotent method may allow, and that is a method's property, not a service's.
fn cache_per_method(prefix: &str, layer: &axle_governance::TierSettings) -> Result<(), KeyError> {
    let key = match (layer.cache_ttl_ms, layer.cache_max_entries) {
        (Some(_), _) => "cache-ttl-ms",
        (None, Some(_)) => "cache-max-entries",
        (None, None) => return Ok(()),
    };
    Err((
        format!("{prefix}{key}"),
        "result caching is set per method ([services.<s>.methods.<m>])".to_string(),
    ))
}

/// Compression is a connection's, and a connection carries every service and method.
fn compression_is_global(
    prefix: &str,
    layer: &axle_governance::TierSettings,
) -> Result<(), KeyError> {
    let key = match (&layer.compression, layer.compression_min_bytes) {
        (Some(_), _) => "compression",
        (None, Some(_)) => "compression-min-bytes",
        (None, None) => return Ok(()),
    };
    Err((
        format!("{prefix}{key}"),
        "compression is set for every connection, in [governance]".to_string(),
    ))
}

/// A method that caches its answers must be idempotent (the tiers most general first).
fn cache_needs_idempotent(
    prefix: &str,
    tiers: &[&axle_governance::TierSettings],
) -> Result<(), KeyError> {
    let cached = tiers.iter().rev().find_map(|t| t.cache_ttl_ms).unwrap_or(0) > 0;
    let idempotent = tiers
        .iter()
        .rev()
        .find_map(|t| t.idempotent)
        .unwrap_or(false);
    match cached && !idempotent {
        true => Err((
            format!("{prefix}cache-ttl-ms"),
            "only an idempotent method may cache its answers (set idempotent = true)".to_string(),
        )),
        false => Ok(()),
    }
}

/// Validates the raw tables into a manifest (`file` is filled in by the caller).
fn validate(raw: RawManifest, base: &Path) -> Result<Manifest, KeyError> {
    let check_layer = |prefix: &str, layer: &axle_governance::TierSettings| {
        layer
            .validate()
            .map_err(|(key, reason)| (format!("{prefix}{key}"), reason))
    };
    check_layer("governance.", &raw.governance)?;
    cache_per_method("governance.", &raw.governance)?;
    let mut service_governance = BTreeMap::new();
    let mut method_governance = BTreeMap::new();
    for (name, svc) in &raw.services {
        check_layer(&format!("services.{name}.governance."), &svc.governance)?;
        cache_per_method(&format!("services.{name}.governance."), &svc.governance)?;
        compression_is_global(&format!("services.{name}.governance."), &svc.governance)?;
        service_governance.insert(name.clone(), svc.governance.clone());
        for (method, layer) in &svc.methods {
            check_layer(&format!("services.{name}.methods.{method}."), layer)?;
            compression_is_global(&format!("services.{name}.methods.{method}."), layer)?;
            let tiers = [&raw.governance, &svc.governance, layer];
            cache_needs_idempotent(&format!("services.{name}.methods.{method}."), &tiers)?;
            method_governance.insert((name.clone(), method.clone()), layer.clone());
        }
    }
    raw.serve
        .flaky
        .validate()
        .map_err(|r| ("serve.flaky".to_string(), r))?;
    let service_discovery: BTreeMap<_, _> = raw
        .services
        .iter()
        .filter_map(|(name, s)| s.discovery.clone().map(|d| (name.clone(), d)))
        .collect();
    let discovery =
        axle_discovery::DiscoveryConfig::from_raw(raw.discovery, &service_discovery, base)?;
    let tls = security::tls(raw.tls, base)?;
    let trust = security::trust(raw.trust)?;
    let (gateway, sidecar) = (
        gateway::gateway(raw.gateway)?,
        gateway::sidecar(raw.sidecar)?,
    );
    let mut plugins = BTreeMap::new();
    for (name, p) in raw.plugins {
        plugins.insert(name.clone(), plugins::spec(name, p, base)?);
    }
    let slots = slots::check(&plugins, "slots.", raw.slots)?;
    slots::check_tier_selector(&plugins, "governance.", &raw.governance)?;
    let mut services = BTreeMap::new();
    let mut endpoints = BTreeMap::new();
    let mut weight_overrides = BTreeMap::new();
    for (name, svc) in raw.services {
        slots::check_tier_selector(
            &plugins,
            &format!("services.{name}.governance."),
            &svc.governance,
        )?;
        for (method, layer) in &svc.methods {
            slots::check_tier_selector(
                &plugins,
                &format!("services.{name}.methods.{method}."),
                layer,
            )?;
        }
        services.insert(
            name.clone(),
            slots::check(&plugins, &format!("services.{name}.slots."), svc.slots)?,
        );
        let weights = weights::check(&format!("services.{name}.weights"), svc.weights)?;
        if !weights.is_empty() {
            weight_overrides.insert(name.clone(), weights);
        }
        let list = endpoints::list(&format!("services.{name}.endpoints"), svc.endpoints)?;
        if !list.is_empty() {
            endpoints.insert(name, list);
        }
    }
    let manifest = Manifest {
        file: String::new(),
        serve: ServeSpec {
            limits: serve::limits(&raw.serve)?,
            listen: raw.serve.listen,
            flaky: raw.serve.flaky,
        },
        plugins,
        slots,
        services,
        endpoints,
        weight_overrides,
        governance: raw.governance,
        service_governance,
        method_governance,
        discovery,
        tls,
        trust,
        gateway,
        sidecar,
    };
    shadow::check_apart(&manifest)?;
    Ok(manifest)
}

impl Manifest {
    /// Loads and validates a manifest file, laid over the embedded defaults and the files
    /// it `extends`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        Manifest::from_layers(&layers::load(path)?)
    }

    /// The manifest embedded in the binary (the repository's `plugins.toml`); relative
    /// component paths resolve against the current directory.
    pub fn embedded() -> Result<Manifest, ManifestError> {
        Manifest::from_layers(&layers::alone(layers::embedded())?)
    }

    /// The layers of `--manifest PATH` (or of the embedded default alone) and their
    /// merged table, before validation: what `axle config show` prints.
    pub fn layered(path: Option<&Path>) -> Result<Layered, ManifestError> {
        match path {
            Some(p) => layers::load(p),
            None => layers::alone(layers::embedded()),
        }
    }

    /// Validates merged layers. Errors point into the layer that wrote the value; relative
    /// paths resolve against the last layer's folder (an extended file's were made
    /// absolute when it was merged).
    pub fn from_layers(layered: &Layered) -> Result<Manifest, ManifestError> {
        let top = layered.layers.last();
        let base = top.map_or(Path::new("."), |l| l.base.as_path());
        let raw = read_raw(&layered.table).map_err(|(path, r)| layered.error_at(&path, r))?;
        let mut manifest = validate(raw, base)
            .map_err(|(key, reason)| layered.error_at(&locate::parse_dotted(&key), reason))?;
        manifest.file = top.map_or_else(String::new, |l| l.file.clone());
        Ok(manifest)
    }

    /// `--manifest PATH` if given, else the embedded default.
    pub fn load_or_embedded(path: Option<&Path>) -> Result<Manifest, ManifestError> {
        match path {
            Some(p) => Manifest::load(p),
            None => Manifest::embedded(),
        }
    }

    /// Parses and validates manifest text as a whole manifest, laid over nothing (a
    /// manifest built in code, a providers file). `file` names it in errors; `base`
    /// resolves relative paths.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Manifest, ManifestError> {
        Manifest::from_layers(&layers::alone(layers::Layer {
            file: file.to_string(),
            text: text.to_string(),
            base: base.to_path_buf(),
        })?)
    }

    /// What discovery backends need from this manifest: its endpoint lists (the static
    /// registry), its timings, and its parser (a `file:` registry's syntax).
    pub fn backend_options(&self) -> axle_discovery::BackendOptions {
        axle_discovery::BackendOptions {
            parse_endpoints,
            manifest_endpoints: self.endpoints.clone(),
            lease_ttl: Duration::from_secs(self.discovery.lease_ttl_s),
            resync: Duration::from_millis(self.discovery.resync_ms),
            file_poll: Duration::from_millis(self.discovery.file_poll_ms),
            etcd: self.discovery.etcd.clone(),
        }
    }

    /// The effective governance of `service/method`, and where each value came from.
    pub fn governance_explained(
        &self,
        service: &str,
        method: &str,
    ) -> (
        axle_governance::Governance,
        Vec<(&'static str, String, axle_governance::Tier)>,
    ) {
        use axle_governance::Tier;
        let mut tiers = vec![(Tier::Global, &self.governance)];
        if let Some(l) = self.service_governance.get(service) {
            tiers.push((Tier::Service, l));
        }
        if let Some(l) = self
            .method_governance
            .get(&(service.to_string(), method.to_string()))
        {
            tiers.push((Tier::Method, l));
        }
        axle_governance::resolve(&tiers)
    }

    /// The effective governance of `service/method`.
    pub fn governance(&self, service: &str, method: &str) -> axle_governance::Governance {
        self.governance_explained(service, method).0
    }

    /// The transport's payload compression (`[governance]` `compression`,
    /// `compression-min-bytes`), for both the caller's and the provider's connections.
    pub fn compression(&self) -> axle_wire::Compression {
        let tiers = [(axle_governance::Tier::Global, &self.governance)];
        let g = axle_governance::resolve(&tiers).0;
        // The name was checked when the manifest was read.
        let encoding = axle_wire::Encoding::parse(&g.compression).unwrap_or(None);
        let min = usize::try_from(g.compression_min_bytes).unwrap_or(usize::MAX);
        axle_wire::Compression::new(encoding, min)
    }

    /// The plugin filling `slot` for `service`: the service's choice, else the default.
    pub fn slots_for(&self, service: &str) -> Slots {
        let default = self.slots.clone();
        match self.services.get(service) {
            None => default,
            Some(s) => Slots {
                serializer: s.serializer.clone().or(default.serializer),
                selector: s.selector.clone().or(default.selector),
                routers: s.routers.clone().or(default.routers),
                health_scorer: s.health_scorer.clone().or(default.health_scorer),
                limiter: s.limiter.clone().or(default.limiter),
                client_interceptors: s
                    .client_interceptors
                    .clone()
                    .or(default.client_interceptors),
                server_interceptors: s
                    .server_interceptors
                    .clone()
                    .or(default.server_interceptors),
                shadow_selector: s.shadow_selector.clone().or(default.shadow_selector),
                shadow_routers: s.shadow_routers.clone().or(default.shadow_routers),
                shadow_limiter: default.shadow_limiter,
                shadow_sample: s.shadow_sample.or(default.shadow_sample),
            },
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_layers;

#[cfg(test)]
mod tests_interceptors;
