//! The manifest (`plugins.toml`): which plugins exist, their config and limits, which
//! plugin fills each slot, by default and per service, governance tiers, endpoints and
//! discovery, parsed into the typed configs the crates below it take.
//!
//! Loading validates everything a later stage would trip over, and every error names the
//! file, the key and the reason. Parsing is split by table: [`raw`] (as written),
//! `plugins` (`[plugins]`), `slots`, `endpoints`, `serve`. Every default is indexed in
//! [`defaults`].

pub mod defaults;
mod endpoints;
mod gateway;
mod plugins;
mod raw;
mod security;
mod serve;
mod slots;

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

use raw::RawManifest;

/// A validation failure before the file is known: (dotted key, reason).
pub(crate) type KeyError = (String, String);

/// A manifest that failed to load: where, which key, why.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {key}: {reason}")]
pub struct ManifestError {
    /// The manifest file (or `<embedded plugins.toml>`).
    pub file: String,
    /// The dotted key at fault (`plugins.rr.timeout-ms`), or `(file)`.
    pub key: String,
    /// What is wrong.
    pub reason: String,
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

/// The text as TOML, then as the manifest's tables (errors name the line or the key).
fn read_raw(text: &str) -> Result<RawManifest, KeyError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let key = match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}")
            }
            None => "(file)".to_string(),
        };
        (key, format!("not valid TOML: {}", e.message()))
    })?;
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." {
            "(top level)".into()
        } else {
            path
        };
        (key, e.into_inner().to_string())
    })
}

/// Validates the raw tables into a manifest (`file` is filled in by the caller).
fn validate(raw: RawManifest, base: &Path) -> Result<Manifest, KeyError> {
    let check_layer = |prefix: &str, layer: &axle_governance::TierSettings| {
        layer
            .validate()
            .map_err(|(key, reason)| (format!("{prefix}{key}"), reason))
    };
    check_layer("governance.", &raw.governance)?;
    let mut service_governance = BTreeMap::new();
    let mut method_governance = BTreeMap::new();
    for (name, svc) in &raw.services {
        check_layer(&format!("services.{name}.governance."), &svc.governance)?;
        service_governance.insert(name.clone(), svc.governance.clone());
        for (method, layer) in &svc.methods {
            check_layer(&format!("services.{name}.methods.{method}."), layer)?;
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
    let (gateway, sidecar) = (gateway::gateway(raw.gateway)?, gateway::sidecar(raw.sidecar)?);
    let mut plugins = BTreeMap::new();
    for (name, p) in raw.plugins {
        plugins.insert(name.clone(), plugins::spec(name, p, base)?);
    }
    let slots = slots::check(&plugins, "slots.", raw.slots)?;
    slots::check_tier_selector(&plugins, "governance.", &raw.governance)?;
    let mut services = BTreeMap::new();
    let mut endpoints = BTreeMap::new();
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
        let list = endpoints::list(&format!("services.{name}.endpoints"), svc.endpoints)?;
        if !list.is_empty() {
            endpoints.insert(name, list);
        }
    }
    Ok(Manifest {
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
        governance: raw.governance,
        service_governance,
        method_governance,
        discovery,
        tls,
        trust,
        gateway,
        sidecar,
    })
}

impl Manifest {
    /// Loads and validates a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            file: file.clone(),
            key: "(file)".into(),
            reason: format!("cannot read: {e}"),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Manifest::parse(&text, &file, base)
    }

    /// The manifest embedded in the binary (the repository's `plugins.toml`); relative
    /// component paths resolve against the current directory.
    pub fn embedded() -> Result<Manifest, ManifestError> {
        Manifest::parse(
            defaults::EMBEDDED_MANIFEST,
            defaults::EMBEDDED_MANIFEST_NAME,
            Path::new("."),
        )
    }

    /// `--manifest PATH` if given, else the embedded default.
    pub fn load_or_embedded(path: Option<&Path>) -> Result<Manifest, ManifestError> {
        match path {
            Some(p) => Manifest::load(p),
            None => Manifest::embedded(),
        }
    }

    /// Parses and validates manifest text. `file` names it in errors; `base` resolves
    /// relative component paths.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Manifest, ManifestError> {
        let at_file = |(key, reason): KeyError| ManifestError {
            file: file.to_string(),
            key,
            reason,
        };
        let mut manifest = validate(read_raw(text).map_err(at_file)?, base).map_err(at_file)?;
        manifest.file = file.to_string();
        Ok(manifest)
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
            },
        }
    }
}

#[cfg(test)]
mod tests;
