//! The manifest as written: serde's view of `plugins.toml`, before validation. Unknown
//! keys are refused here, so a misspelt key fails with its path.

use std::collections::BTreeMap;

use serde::Deserialize;

use axle_plugin_host::PluginKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawManifest {
    #[serde(default)]
    pub(crate) governance: axle_governance::TierSettings,
    #[serde(default)]
    pub(crate) serve: RawServe,
    #[serde(default)]
    pub(crate) slots: RawSlots,
    #[serde(default)]
    pub(crate) plugins: BTreeMap<String, RawPlugin>,
    #[serde(default)]
    pub(crate) services: BTreeMap<String, RawService>,
    #[serde(default)]
    pub(crate) discovery: axle_discovery::config::RawDiscovery,
    #[serde(default)]
    pub(crate) tls: crate::security::RawTls,
    #[serde(default)]
    pub(crate) trust: crate::security::RawTrust,
    #[serde(default)]
    pub(crate) gateway: crate::gateway::RawGateway,
    #[serde(default)]
    pub(crate) sidecar: crate::gateway::RawSidecar,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawSlots {
    pub(crate) serializer: Option<String>,
    pub(crate) selector: Option<String>,
    pub(crate) routers: Option<Vec<String>>,
    pub(crate) health_scorer: Option<String>,
    pub(crate) limiter: Option<String>,
    pub(crate) client_interceptors: Option<Vec<String>>,
    pub(crate) server_interceptors: Option<Vec<String>>,
    pub(crate) shadow_selector: Option<String>,
    pub(crate) shadow_routers: Option<Vec<String>>,
    pub(crate) shadow_limiter: Option<String>,
    pub(crate) shadow_sample: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawServe {
    pub(crate) listen: Option<String>,
    #[serde(default)]
    pub(crate) flaky: crate::serve::FlakyConfig,
    pub(crate) max_connections: Option<u64>,
    pub(crate) idle_timeout_ms: Option<u64>,
    pub(crate) frame_timeout_ms: Option<u64>,
    pub(crate) max_requests_per_connection: Option<u64>,
    pub(crate) max_buffered_bytes: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawService {
    #[serde(default)]
    pub(crate) governance: axle_governance::TierSettings,
    #[serde(default)]
    pub(crate) methods: BTreeMap<String, axle_governance::TierSettings>,
    #[serde(default)]
    pub(crate) slots: RawSlots,
    #[serde(default)]
    pub(crate) endpoints: Vec<RawEndpoint>,
    pub(crate) discovery: Option<axle_discovery::config::RawServiceDiscovery>,
    /// `"host:port" = weight`: overrides of what discovery says (`weights.rs`).
    #[serde(default)]
    pub(crate) weights: BTreeMap<String, u32>,
}

/// `"host:port"` or `{ address, weight, tags }`. Not serde's untagged enum: that one hides
/// why a table did not match (`wieght = 5` must be named, with its line).
pub(crate) enum RawEndpoint {
    Address(String),
    Full(RawEndpointTable),
}

impl<'de> Deserialize<'de> for RawEndpoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Endpoint;
        impl<'de> serde::de::Visitor<'de> for Endpoint {
            type Value = RawEndpoint;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "\"host:port\" or { address = \"host:port\", weight = N, tags = {...} }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawEndpoint, E> {
                Ok(RawEndpoint::Address(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawEndpoint, A::Error> {
                let table = serde::de::value::MapAccessDeserializer::new(map);
                RawEndpointTable::deserialize(table).map(RawEndpoint::Full)
            }
        }
        d.deserialize_any(Endpoint)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndpointTable {
    pub(crate) address: String,
    pub(crate) weight: Option<u32>,
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawPlugin {
    pub(crate) kind: PluginKind,
    pub(crate) component: String,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) memory_mib: Option<u64>,
    pub(crate) instances: Option<u32>,
    pub(crate) on_error: Option<String>,
    pub(crate) key_on: Option<Vec<String>>,
    pub(crate) grant_payload: Option<bool>,
    pub(crate) slow_call_us: Option<u64>,
    #[serde(default)]
    pub(crate) quarantine_slow: bool,
    #[serde(default)]
    pub(crate) config: toml::Table,
}
