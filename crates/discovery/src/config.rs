//! The manifest's `[discovery]` table and `[services.<s>.discovery]`: which registry,
//! which environment and group, and the timings of leases, re-lists and warm-up. Defaults
//! live in `manifest/defaults.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{check_name, RegistryUrl};
use crate::defaults;

/// `[discovery]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawDiscovery {
    registry: Option<String>,
    namespace: Option<String>,
    group: Option<String>,
    secondary_group: Option<String>,
    lease_ttl_s: Option<u64>,
    resync_ms: Option<u64>,
    file_poll_ms: Option<u64>,
    warmup_ms: Option<u64>,
    ready_timeout_ms: Option<u64>,
}

/// `[services.<s>.discovery]` as written: a service's own groups.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawServiceDiscovery {
    group: Option<String>,
    secondary_group: Option<String>,
}

/// A consumer's groups for one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    pub primary: String,
    /// Used only while the primary has no admissible endpoint.
    pub secondary: Option<String>,
}

/// `[discovery]`, validated, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryConfig {
    pub registry: RegistryUrl,
    pub namespace: String,
    /// The default groups (a provider registers in `groups.primary`).
    pub groups: Groups,
    /// Per-service groups (override the defaults).
    pub service_groups: BTreeMap<String, Groups>,
    pub lease_ttl_s: u64,
    pub resync_ms: u64,
    pub file_poll_ms: u64,
    pub warmup_ms: u64,
    pub ready_timeout_ms: u64,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            registry: RegistryUrl::Static,
            namespace: defaults::NAMESPACE.into(),
            groups: Groups {
                primary: defaults::GROUP.into(),
                secondary: None,
            },
            service_groups: BTreeMap::new(),
            lease_ttl_s: defaults::LEASE_TTL_S,
            resync_ms: defaults::RESYNC_MS,
            file_poll_ms: defaults::FILE_POLL_MS,
            warmup_ms: defaults::WARMUP_MS,
            ready_timeout_ms: defaults::READY_TIMEOUT_MS,
        }
    }
}

impl DiscoveryConfig {
    /// Validates the raw tables. Errors are `(key, reason)`, the key relative to the
    /// manifest's root.
    pub fn from_raw(
        raw: RawDiscovery,
        services: &BTreeMap<String, RawServiceDiscovery>,
    ) -> Result<DiscoveryConfig, (String, String)> {
        let d = DiscoveryConfig::default();
        let key = |k: &str| format!("discovery.{k}");
        let registry = match raw.registry {
            None => d.registry,
            Some(url) => RegistryUrl::parse(&url).map_err(|e| (key("registry"), e.to_string()))?,
        };
        let name = |k: &str, what: &'static str, v: Option<String>, default: String| {
            let v = v.unwrap_or(default);
            check_name(what, &v).map_err(|e| (k.to_string(), e.to_string()))?;
            Ok::<_, (String, String)>(v)
        };
        let namespace = name(&key("namespace"), "namespace", raw.namespace, d.namespace)?;
        let primary = name(&key("group"), "group", raw.group, d.groups.primary)?;
        let secondary = match raw.secondary_group {
            None => None,
            Some(g) => Some(name(
                &key("secondary-group"),
                "group",
                Some(g),
                String::new(),
            )?),
        };
        let groups = Groups { primary, secondary };
        let mut service_groups = BTreeMap::new();
        for (service, s) in services {
            let k = |f: &str| format!("services.{service}.discovery.{f}");
            let primary = name(
                &k("group"),
                "group",
                s.group.clone(),
                groups.primary.clone(),
            )?;
            let secondary = match &s.secondary_group {
                None => groups.secondary.clone(),
                Some(g) => Some(name(
                    &k("secondary-group"),
                    "group",
                    Some(g.clone()),
                    String::new(),
                )?),
            };
            service_groups.insert(service.clone(), Groups { primary, secondary });
        }
        let positive = |k: &str, v: Option<u64>, default: u64, max: u64| match v {
            None => Ok(default),
            Some(0) => Err((key(k), "must be at least 1".to_string())),
            Some(v) if v > max => Err((key(k), format!("must be at most {max} (got {v})"))),
            Some(v) => Ok(v),
        };
        Ok(DiscoveryConfig {
            registry,
            namespace,
            groups,
            service_groups,
            lease_ttl_s: positive("lease-ttl-s", raw.lease_ttl_s, d.lease_ttl_s, 3600)?,
            resync_ms: positive("resync-ms", raw.resync_ms, d.resync_ms, 3_600_000)?,
            file_poll_ms: positive("file-poll-ms", raw.file_poll_ms, d.file_poll_ms, 3_600_000)?,
            // 0 turns warm-up off.
            warmup_ms: match raw.warmup_ms {
                Some(v) if v > 86_400_000 => {
                    return Err((
                        key("warmup-ms"),
                        format!("must be at most 86400000 (got {v})"),
                    ))
                }
                v => v.unwrap_or(d.warmup_ms),
            },
            ready_timeout_ms: positive(
                "ready-timeout-ms",
                raw.ready_timeout_ms,
                d.ready_timeout_ms,
                3_600_000,
            )?,
        })
    }

    /// The groups a consumer of `service` follows.
    pub fn groups_for(&self, service: &str) -> Groups {
        self.service_groups
            .get(service)
            .cloned()
            .unwrap_or_else(|| self.groups.clone())
    }

    /// The warm-up consumers apply when a provider does not advertise its own.
    pub fn warmup(&self) -> Duration {
        Duration::from_millis(self.warmup_ms)
    }
}
