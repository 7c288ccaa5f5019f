//! The manifest's `[discovery]` table and `[services.<s>.discovery]`: which registry,
//! which environment and group, and the timings of leases, re-lists and warm-up; and
//! `[discovery.etcd]`: how etcd is reached (TLS, credentials) and what a consumer accepts
//! from it. Defaults live in `defaults.rs` (re-exported by `manifest/defaults.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{check_name, RegistryUrl};
use crate::admit::{EntryLimits, Network};
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
    etcd: Option<RawEtcd>,
}

/// `[discovery.etcd]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawEtcd {
    user: Option<String>,
    /// Refused with a message: a password is never written in the manifest.
    password: Option<IgnoredAny>,
    password_file: Option<String>,
    password_env: Option<String>,
    ca_file: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    server_name: Option<String>,
    allowed_networks: Option<Vec<String>>,
    max_instances: Option<u64>,
    max_value_bytes: Option<u64>,
    max_tags: Option<u64>,
    max_tag_bytes: Option<u64>,
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
    /// How etcd is reached and what is accepted from it.
    pub etcd: EtcdConfig,
}

/// Where the etcd password is read from (at each connection, so a rotated one is used
/// from the next reconnect on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordSource {
    File(PathBuf),
    Env(String),
}

/// `[discovery.etcd]`, validated. Holds file names and a variable name, never a secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdConfig {
    /// etcd user (with [`EtcdConfig::password`]).
    pub user: Option<String>,
    pub password: Option<PasswordSource>,
    /// Trust roots for etcd's server certificate (PEM); set, the endpoints are `https://`.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for etcd's `--client-cert-auth`.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The name etcd's certificate must carry (default: the host of each endpoint).
    pub server_name: Option<String>,
    /// What one registry entry may be.
    pub limits: EntryLimits,
}

impl EtcdConfig {
    /// Whether etcd is reached over TLS.
    pub fn tls(&self) -> bool {
        self.ca_file.is_some()
    }

    /// The password, read now from its file (one trailing newline dropped) or variable.
    pub fn read_password(&self) -> Result<Option<String>, String> {
        let pw = match &self.password {
            None => return Ok(None),
            Some(PasswordSource::File(f)) => std::fs::read_to_string(f)
                .map_err(|e| format!("password-file {}: {e}", f.display()))?
                .trim_end_matches(['\n', '\r'])
                .to_string(),
            Some(PasswordSource::Env(v)) => {
                std::env::var(v).map_err(|e| format!("password-env {v}: {e}"))?
            }
        };
        if pw.is_empty() {
            return Err("the etcd password is empty".into());
        }
        Ok(Some(pw))
    }

    fn from_raw(raw: RawEtcd, base: &Path) -> Result<EtcdConfig, (String, String)> {
        let key = |k: &str| format!("discovery.etcd.{k}");
        let err = |k: &str, why: &str| Err((key(k), why.to_string()));
        if raw.password.is_some() {
            return err(
                "password",
                "a password is never written in the manifest: name a file (`password-file`) or an environment variable (`password-env`) that holds it",
            );
        }
        let path = |p: Option<String>| p.map(|p| base.join(p));
        let password = match (raw.password_file, raw.password_env) {
            (Some(_), Some(_)) => {
                return err(
                    "password-env",
                    "set password-file or password-env, not both",
                )
            }
            (Some(f), None) => Some(PasswordSource::File(base.join(f))),
            (None, Some(v)) if v.is_empty() || v.contains(['=', '\0']) => {
                return err("password-env", "not an environment variable name")
            }
            (None, Some(v)) => Some(PasswordSource::Env(v)),
            (None, None) => None,
        };
        match (&raw.user, &password) {
            (Some(u), _) if u.is_empty() || u.chars().any(char::is_control) => {
                return err("user", "an empty user name, or one with control characters")
            }
            (Some(_), None) => return err("user", "a user needs password-file or password-env"),
            (None, Some(_)) => return err("user", "a password needs a user"),
            _ => {}
        }
        let tls = raw.ca_file.is_some();
        if raw.cert_file.is_some() != raw.key_file.is_some() {
            return err("cert-file", "cert-file and key-file go together");
        }
        if raw.cert_file.is_some() && !tls {
            return err(
                "cert-file",
                "a client certificate needs TLS: set ca-file (etcd's trust roots)",
            );
        }
        if raw.server_name.is_some() && !tls {
            return err("server-name", "server-name needs TLS: set ca-file");
        }
        let d = EntryLimits::default();
        let cap = |k: &str, v: Option<u64>, default: usize, max: u64| match v {
            None => Ok(default),
            Some(0) => Err((key(k), "must be at least 1".to_string())),
            Some(v) if v > max => Err((key(k), format!("must be at most {max} (got {v})"))),
            Some(v) => Ok(v as usize),
        };
        let mut allowed_networks = Vec::new();
        for n in raw.allowed_networks.unwrap_or_default() {
            allowed_networks
                .push(Network::parse(n.trim()).map_err(|e| (key("allowed-networks"), e))?);
        }
        Ok(EtcdConfig {
            user: raw.user,
            password,
            ca_file: path(raw.ca_file),
            cert_file: path(raw.cert_file),
            key_file: path(raw.key_file),
            server_name: raw.server_name,
            limits: EntryLimits {
                max_instances: cap("max-instances", raw.max_instances, d.max_instances, 65_536)?,
                max_value_bytes: cap(
                    "max-value-bytes",
                    raw.max_value_bytes,
                    d.max_value_bytes,
                    16 << 20,
                )?,
                max_tags: cap("max-tags", raw.max_tags, d.max_tags, 1024)?,
                max_tag_bytes: cap("max-tag-bytes", raw.max_tag_bytes, d.max_tag_bytes, 65_536)?,
                allowed_networks,
            },
        })
    }
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
            etcd: EtcdConfig::default(),
        }
    }
}

impl DiscoveryConfig {
    /// Validates the raw tables. Errors are `(key, reason)`, the key relative to the
    /// manifest's root. Relative file names are relative to `base` (the manifest's
    /// folder).
    pub fn from_raw(
        raw: RawDiscovery,
        services: &BTreeMap<String, RawServiceDiscovery>,
        base: &Path,
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
            etcd: EtcdConfig::from_raw(raw.etcd.unwrap_or_default(), base)?,
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
