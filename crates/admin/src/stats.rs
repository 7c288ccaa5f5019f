//! The `stats` admin method: every client's view of its endpoints (the seed's
//! `ClientInvokeInfo`) and every server's view of its methods (`ServerHandleInfo`), as
//! one [`StatsReport`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Targets;
use crate::consumers::ServiceConsumers;
use axle_client::rules::RuleStatus;
use axle_client::ServiceView;
use axle_plugin_host::shadow::ShadowView;
use axle_plugin_host::PluginCounters;
use axle_server::{ServerView, Status};

/// What `stats` answers (and `axle stats --json` prints).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StatsReport {
    pub clients: Vec<ClientStats>,
    pub servers: Vec<ServerStats>,
    /// Who calls the services this kernel provides, from the registry it registers in
    /// (only the `stats` method lists them: it is asked rarely, and may wait on etcd).
    #[serde(default)]
    pub consumers: Vec<ServiceConsumers>,
}

/// One client: per service, per endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientStats {
    pub name: String,
    pub services: Vec<ServiceView>,
    /// Its plugins' counters: calls, faults by cause, quarantine, log lines.
    #[serde(default)]
    pub plugins: Vec<PluginCounters>,
    /// The run-time rules it follows (`axle rules`): the revision in force, the last
    /// one refused and why.
    #[serde(default)]
    pub rules: Vec<RuleStatus>,
}

/// One server: per service/method.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerStats {
    pub name: String,
    /// The counters of the plugins in its path (its limiter).
    #[serde(default)]
    pub plugins: Vec<PluginCounters>,
    /// The run-time rules whose limits it follows (`axle rules`, `[limits]`): the
    /// revision in force, the last one refused and why.
    #[serde(default)]
    pub rules: Vec<RuleStatus>,
    /// Its shadow limiter: what it would have decided (`docs/shadow.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<ShadowView>,
    #[serde(flatten)]
    pub view: ServerView,
}

impl StatsReport {
    /// The report of `targets` now.
    pub fn of(targets: &Targets) -> StatsReport {
        StatsReport {
            clients: targets
                .clients
                .iter()
                .map(|(name, c)| ClientStats {
                    name: name.clone(),
                    services: c.services(),
                    plugins: c.plugins(),
                    rules: c.rules(),
                })
                .collect(),
            servers: targets
                .servers
                .iter()
                .map(|(name, s)| ServerStats {
                    name: name.clone(),
                    plugins: s.plugins(),
                    rules: targets
                        .server_rules
                        .as_ref()
                        .map(|book| book.all())
                        .unwrap_or_default(),
                    shadows: s.shadows(),
                    view: s.stats(),
                })
                .collect(),
            consumers: Vec::new(),
        }
    }
}

/// The method: takes nothing (`null` or `{}`).
pub async fn stats(targets: Arc<Targets>, _body: Value) -> Result<Value, Status> {
    let mut report = StatsReport::of(&targets);
    if let Some(source) = &targets.consumers {
        report.consumers = source.list().await;
    }
    serde_json::to_value(report)
        .map_err(|e| Status::internal(format!("cannot encode the stats: {e}")))
}
