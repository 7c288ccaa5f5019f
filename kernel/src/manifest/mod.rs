//! The manifest (`plugins.toml`): which plugins exist, their config and limits, and which
//! plugin fills each slot, by default and per service.
//!
//! Loading validates everything a later stage would trip over, and every error names the
//! file, the key and the reason. Defaults live in [`defaults`].

pub mod defaults;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The five plugin kinds (one WIT world each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    Serializer,
    Selector,
    Router,
    HealthScorer,
    Limiter,
}

impl PluginKind {
    /// The kind's name as written in manifests and WIT (`health-scorer`).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Serializer => "serializer",
            PluginKind::Selector => "selector",
            PluginKind::Router => "router",
            PluginKind::HealthScorer => "health-scorer",
            PluginKind::Limiter => "limiter",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// Where a plugin's component comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComponentSource {
    /// Shipped inside the `axle` binary (`builtin:NAME`).
    Builtin(String),
    /// A file (relative paths are resolved against the manifest's directory).
    File(PathBuf),
}

impl fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::Builtin(name) => write!(f, "builtin:{name}"),
            ComponentSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One `[plugins.<name>]` entry, validated and with defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginSpec {
    /// The entry's name: what slots refer to.
    pub name: String,
    /// Its kind (the WIT world its component must implement).
    pub kind: PluginKind,
    /// Where the component is.
    pub component: ComponentSource,
    /// Longest a single call may run (ms).
    pub timeout_ms: u64,
    /// Most linear memory per instance (bytes).
    pub memory_bytes: u64,
    /// How many instances serve calls (see [`defaults::instances`]).
    pub instances: u32,
    /// Limiters only: what a call gets when the plugin fails.
    pub on_error_admit: bool,
    /// `[plugins.<name>.config]`, handed to the plugin's `init`.
    pub config: toml::Table,
}

/// Which plugin fills each slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slots {
    pub serializer: Option<String>,
    pub selector: Option<String>,
    pub routers: Option<Vec<String>>,
    pub health_scorer: Option<String>,
    pub limiter: Option<String>,
}

/// One provider endpoint of a service, as the manifest lists it (the embedded default
/// registry; discovery backends come later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSpec {
    /// `host:port`.
    pub address: String,
    /// Relative weight (default [`defaults::ENDPOINT_WEIGHT`]).
    pub weight: u32,
    /// Tags (zone, lane, version, ...).
    pub tags: Vec<(String, String)>,
}

impl EndpointSpec {
    /// An endpoint with the default weight and no tags.
    pub fn new(address: impl Into<String>) -> Self {
        EndpointSpec {
            address: address.into(),
            weight: defaults::ENDPOINT_WEIGHT,
            tags: Vec::new(),
        }
    }
}

/// `[serve]`: how `axle serve` runs by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeSpec {
    /// Where to listen (`--listen` overrides; default [`defaults::LISTEN`]).
    pub listen: Option<String>,
    /// The `flaky` service's behaviour (`--flaky-*` flags override field by field).
    pub flaky: crate::services::flaky::FlakyConfig,
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
    pub governance: crate::governance::Layer,
    /// `[services.<s>.governance]`: the service tier.
    pub service_governance: BTreeMap<String, crate::governance::Layer>,
    /// `[services.<s>.methods.<m>]`: the method tier.
    pub method_governance: BTreeMap<(String, String), crate::governance::Layer>,
    /// `[discovery]` and `[services.<s>.discovery]`: registry, namespace, groups, timings.
    pub discovery: crate::discovery::DiscoveryConfig,
}

// ---- raw, as written -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    governance: crate::governance::Layer,
    #[serde(default)]
    serve: RawServe,
    #[serde(default)]
    slots: RawSlots,
    #[serde(default)]
    plugins: BTreeMap<String, RawPlugin>,
    #[serde(default)]
    services: BTreeMap<String, RawService>,
    #[serde(default)]
    discovery: crate::discovery::config::RawDiscovery,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSlots {
    serializer: Option<String>,
    selector: Option<String>,
    routers: Option<Vec<String>>,
    health_scorer: Option<String>,
    limiter: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServe {
    listen: Option<String>,
    #[serde(default)]
    flaky: crate::services::flaky::FlakyConfig,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawService {
    #[serde(default)]
    governance: crate::governance::Layer,
    #[serde(default)]
    methods: BTreeMap<String, crate::governance::Layer>,
    #[serde(default)]
    slots: RawSlots,
    #[serde(default)]
    endpoints: Vec<RawEndpoint>,
    discovery: Option<crate::discovery::config::RawServiceDiscovery>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEndpoint {
    Address(String),
    Full(RawEndpointTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpointTable {
    address: String,
    weight: Option<u32>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPlugin {
    kind: PluginKind,
    component: String,
    timeout_ms: Option<u64>,
    memory_mib: Option<u64>,
    instances: Option<u32>,
    on_error: Option<String>,
    #[serde(default)]
    config: toml::Table,
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
        let err = |key: &str, reason: String| ManifestError {
            file: file.to_string(),
            key: key.to_string(),
            reason,
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let key = match e.span() {
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}")
                }
                None => "(file)".to_string(),
            };
            err(&key, format!("not valid TOML: {}", e.message()))
        })?;
        let raw: RawManifest = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
                let path = e.path().to_string();
                let key = if path == "." {
                    "(top level)".into()
                } else {
                    path
                };
                err(&key, e.into_inner().to_string())
            })?;

        let check_layer = |prefix: &str, layer: &crate::governance::Layer| {
            layer
                .validate()
                .map_err(|(key, reason)| err(&format!("{prefix}{key}"), reason))
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
        if let Err(reason) = raw.serve.flaky.validate() {
            return Err(err("serve.flaky", reason));
        }
        let service_discovery: BTreeMap<_, _> = raw
            .services
            .iter()
            .filter_map(|(name, s)| s.discovery.clone().map(|d| (name.clone(), d)))
            .collect();
        let discovery =
            crate::discovery::DiscoveryConfig::from_raw(raw.discovery, &service_discovery)
                .map_err(|(key, reason)| err(&key, reason))?;
        let serve = ServeSpec {
            listen: raw.serve.listen,
            flaky: raw.serve.flaky,
        };
        let mut plugins = BTreeMap::new();
        for (name, p) in raw.plugins {
            let key = |k: &str| format!("plugins.{name}.{k}");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(err(
                    &format!("plugins.{name}"),
                    "plugin names use letters, digits, '-' and '_'".into(),
                ));
            }
            let component = match p.component.strip_prefix("builtin:") {
                Some(b) => {
                    if crate::plugin::builtin::component(b).is_none() {
                        return Err(err(
                            &key("component"),
                            format!(
                                "no builtin component `{b}` (builtins: {})",
                                crate::plugin::builtin::names().join(", ")
                            ),
                        ));
                    }
                    ComponentSource::Builtin(b.to_string())
                }
                None if p.component.is_empty() => {
                    return Err(err(&key("component"), "must not be empty".into()))
                }
                None => ComponentSource::File(base.join(&p.component)),
            };
            let timeout_ms = p.timeout_ms.unwrap_or(defaults::CALL_TIMEOUT_MS);
            if timeout_ms == 0 || timeout_ms > defaults::MAX_CALL_TIMEOUT_MS {
                return Err(err(
                    &key("timeout-ms"),
                    format!(
                        "must be 1..={} (got {timeout_ms})",
                        defaults::MAX_CALL_TIMEOUT_MS
                    ),
                ));
            }
            let memory_mib = p.memory_mib.unwrap_or(defaults::MEMORY_MIB);
            if memory_mib == 0 || memory_mib > defaults::MAX_MEMORY_MIB {
                return Err(err(
                    &key("memory-mib"),
                    format!(
                        "must be 1..={} (got {memory_mib})",
                        defaults::MAX_MEMORY_MIB
                    ),
                ));
            }
            let instances = p.instances.unwrap_or_else(|| defaults::instances(p.kind));
            if instances == 0 || instances > defaults::MAX_INSTANCES {
                return Err(err(
                    &key("instances"),
                    format!("must be 1..={} (got {instances})", defaults::MAX_INSTANCES),
                ));
            }
            let on_error_admit = match (p.kind, p.on_error.as_deref()) {
                (_, None) => defaults::LIMITER_ON_ERROR_ADMITS,
                (PluginKind::Limiter, Some("admit")) => true,
                (PluginKind::Limiter, Some("reject")) => false,
                (PluginKind::Limiter, Some(other)) => {
                    return Err(err(
                        &key("on-error"),
                        format!("must be \"admit\" or \"reject\" (got {other:?})"),
                    ))
                }
                (kind, Some(_)) => {
                    return Err(err(
                        &key("on-error"),
                        format!("only limiters take on-error; a {kind}'s safe default is fixed"),
                    ))
                }
            };
            plugins.insert(
                name.clone(),
                PluginSpec {
                    name,
                    kind: p.kind,
                    component,
                    timeout_ms,
                    memory_bytes: memory_mib * 1024 * 1024,
                    instances,
                    on_error_admit,
                    config: p.config,
                },
            );
        }

        let check_slots = |prefix: &str, s: RawSlots| -> Result<Slots, ManifestError> {
            let check = |slot: &str, name: &str, kind: PluginKind| -> Result<(), ManifestError> {
                let key = format!("{prefix}{slot}");
                match plugins.get(name) {
                    None => Err(err(&key, format!("no plugin named `{name}` in [plugins]"))),
                    Some(p) if p.kind != kind => Err(err(
                        &key,
                        format!("`{name}` is a {}, this slot takes a {kind}", p.kind),
                    )),
                    Some(_) => Ok(()),
                }
            };
            if let Some(n) = &s.serializer {
                check("serializer", n, PluginKind::Serializer)?;
            }
            if let Some(n) = &s.selector {
                check("selector", n, PluginKind::Selector)?;
            }
            for n in s.routers.iter().flatten() {
                check("routers", n, PluginKind::Router)?;
            }
            if let Some(n) = &s.health_scorer {
                check("health-scorer", n, PluginKind::HealthScorer)?;
            }
            if let Some(n) = &s.limiter {
                check("limiter", n, PluginKind::Limiter)?;
            }
            Ok(Slots {
                serializer: s.serializer,
                selector: s.selector,
                routers: s.routers,
                health_scorer: s.health_scorer,
                limiter: s.limiter,
            })
        };
        let slots = check_slots("slots.", raw.slots)?;
        // A governance tier may pick the selector (shunt strategy) of its calls.
        let mut layers: Vec<(String, &crate::governance::Layer)> =
            vec![("governance.".into(), &raw.governance)];
        for (name, svc) in &raw.services {
            layers.push((format!("services.{name}.governance."), &svc.governance));
            for (method, layer) in &svc.methods {
                layers.push((format!("services.{name}.methods.{method}."), layer));
            }
        }
        for (prefix, layer) in layers {
            if let Some(name) = layer.selector.as_deref().filter(|n| !n.is_empty()) {
                let key = format!("{prefix}selector");
                match plugins.get(name) {
                    None => {
                        return Err(err(&key, format!("no plugin named `{name}` in [plugins]")))
                    }
                    Some(p) if p.kind != PluginKind::Selector => {
                        return Err(err(
                            &key,
                            format!("`{name}` is a {}, not a selector", p.kind),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        let mut services = BTreeMap::new();
        let mut endpoints = BTreeMap::new();
        for (name, svc) in raw.services {
            let s = check_slots(&format!("services.{name}.slots."), svc.slots)?;
            services.insert(name.clone(), s);
            let mut list = Vec::new();
            for (i, e) in svc.endpoints.into_iter().enumerate() {
                let key = format!("services.{name}.endpoints[{i}]");
                let spec = match e {
                    RawEndpoint::Address(a) => EndpointSpec::new(a),
                    RawEndpoint::Full(t) => EndpointSpec {
                        address: t.address,
                        weight: t.weight.unwrap_or(defaults::ENDPOINT_WEIGHT),
                        tags: t.tags.into_iter().collect(),
                    },
                };
                if spec.address.parse::<std::net::SocketAddr>().is_err()
                    && spec
                        .address
                        .rsplit_once(':')
                        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
                {
                    return Err(err(&key, format!("`{}` is not host:port", spec.address)));
                }
                list.push(spec);
            }
            if !list.is_empty() {
                endpoints.insert(name, list);
            }
        }
        Ok(Manifest {
            file: file.to_string(),
            serve,
            plugins,
            slots,
            services,
            endpoints,
            governance: raw.governance,
            service_governance,
            method_governance,
            discovery,
        })
    }

    /// The effective governance of `service/method`, and where each value came from.
    pub fn governance_explained(
        &self,
        service: &str,
        method: &str,
    ) -> (
        crate::governance::Governance,
        Vec<(&'static str, String, crate::governance::Tier)>,
    ) {
        use crate::governance::Tier;
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
        crate::governance::resolve(&tiers)
    }

    /// The effective governance of `service/method`.
    pub fn governance(&self, service: &str, method: &str) -> crate::governance::Governance {
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
