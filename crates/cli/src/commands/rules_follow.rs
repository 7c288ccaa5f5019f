//! Run-time rules in a client that follows services through etcd: each followed service's
//! rule (`axle rules`) is read at start and followed after; every new version is laid over
//! the manifest the client started from (`axle_manifest::rules::apply`, the same check
//! `axle rules put` makes, since etcd can be written around the command) and the client is
//! swapped to the result. A version that fails is logged and recorded in the client's
//! stats, and the rules in force stay: a bad write never takes governance away.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axle::client::rules::{RefusedRule, RuleStatus};
use axle::client::Client;
use axle::discovery::rules::{RuleVersion, Rules};
use axle::manifest::{Layered, Manifest};
use axle::plugin::PluginHost;

/// What rules are laid over: the manifest's layers as read (rules are checked against
/// these), and the host the client swaps its plugins through.
pub struct RuleBase {
    host: Arc<PluginHost>,
    layered: Layered,
}

impl RuleBase {
    /// The layers of `--manifest` (or the embedded manifest), for `host`'s client.
    pub fn new(host: Arc<PluginHost>, manifest: Option<&Path>) -> anyhow::Result<RuleBase> {
        Ok(RuleBase {
            host,
            layered: Manifest::layered(manifest)?,
        })
    }
}

/// Following the rules; stops when dropped.
pub type RuleFollow = super::rules_watch::Following;

/// The rules in force, and how to build the client's manifest from them.
struct Applier {
    base: Arc<RuleBase>,
    client: Client,
    /// The manifest the client started from, command-line adjustments (TLS, a demo's own
    /// endpoints) included: a rule changes only its service's governance tiers in it.
    started: Manifest,
    /// Per service, the rule in force: its revision and the manifest it yields.
    in_force: Mutex<BTreeMap<String, (i64, Manifest)>>,
}

/// Applies each of `services`' current rule now, then follows them.
pub async fn start(
    base: Arc<RuleBase>,
    rules: Rules,
    client: &Client,
    started: &Manifest,
    services: &[&str],
) -> anyhow::Result<RuleFollow> {
    let applier = Arc::new(Applier {
        base,
        client: client.clone(),
        started: started.clone(),
        in_force: Mutex::new(BTreeMap::new()),
    });
    for service in services {
        applier.client.set_rule_status(RuleStatus {
            service: service.to_string(),
            ..RuleStatus::default()
        });
    }
    let services = services.iter().map(|s| s.to_string()).collect();
    super::rules_watch::follow(
        &rules,
        services,
        Arc::new(move |service: &str, version: Option<&RuleVersion>| {
            applier.version(service, version)
        }),
    )
    .await
}

impl Applier {
    /// Takes `version` (none or empty: no rule) as `service`'s rule if it checks and the
    /// client swaps to it; otherwise keeps the rules in force and records why.
    fn version(&self, service: &str, version: Option<&RuleVersion>) {
        let mut in_force = self.in_force.lock().unwrap_or_else(|e| e.into_inner());
        let before = in_force.clone();
        let revision = match version.filter(|v| !v.text.is_empty()) {
            Some(v) => match axle::manifest::rules::apply(&self.base.layered, service, &v.text) {
                Ok(ruled) => {
                    in_force.insert(service.to_string(), (v.revision, ruled));
                    Some(v.revision)
                }
                Err(e) => return self.refuse(service, v.revision, e, &in_force),
            },
            None => {
                in_force.remove(service);
                None
            }
        };
        match self
            .client
            .swap(&self.base.host, with_rules(&self.started, &in_force))
        {
            Ok(_) => {
                tracing::info!(service, revision, "run-time rule applied");
                self.client.set_rule_status(RuleStatus {
                    service: service.to_string(),
                    revision,
                    refused: None,
                });
            }
            Err(e) => {
                *in_force = before;
                let at = version.map_or(0, |v| v.revision);
                self.refuse(
                    service,
                    at,
                    format!("the client cannot swap to it: {e:#}"),
                    &in_force,
                );
            }
        }
    }

    /// Logs and records a refused version; the rule in force stays.
    fn refuse(
        &self,
        service: &str,
        revision: i64,
        error: String,
        in_force: &BTreeMap<String, (i64, Manifest)>,
    ) {
        tracing::warn!(
            service,
            revision,
            error,
            "run-time rule refused; the last good rules stay"
        );
        self.client.set_rule_status(RuleStatus {
            service: service.to_string(),
            revision: in_force.get(service).map(|(r, _)| *r),
            refused: Some(RefusedRule { revision, error }),
        });
    }
}

/// `started` with each ruled service's governance tiers, route and weight overrides taken
/// from its rule's manifest (a rule writes nothing else, and the rest of `started` keeps
/// the command line's adjustments).
fn with_rules(started: &Manifest, in_force: &BTreeMap<String, (i64, Manifest)>) -> Manifest {
    let mut m = started.clone();
    for (service, (_, ruled)) in in_force {
        m.service_governance.remove(service);
        m.method_governance.retain(|(s, _), _| s != service);
        if let Some(tier) = ruled.service_governance.get(service) {
            m.service_governance.insert(service.clone(), tier.clone());
        }
        for ((s, method), tier) in &ruled.method_governance {
            if s == service {
                m.method_governance
                    .insert((s.clone(), method.clone()), tier.clone());
            }
        }
        route_and_weights(&mut m, service, ruled);
    }
    m
}

/// A ruled service's `[route]` (its router plugin and routers slot) and `[weights]`.
fn route_and_weights(m: &mut Manifest, service: &str, ruled: &Manifest) {
    let route = axle::manifest::rules_route::route_plugin(service);
    if let Some(spec) = ruled.plugins.get(&route) {
        m.plugins.insert(route, spec.clone());
        let routers = ruled.services.get(service).and_then(|s| s.routers.clone());
        m.services.entry(service.to_string()).or_default().routers = routers;
    }
    match ruled.weight_overrides.get(service) {
        Some(w) => m.weight_overrides.insert(service.to_string(), w.clone()),
        None => m.weight_overrides.remove(service),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_changes_only_its_service_and_keeps_the_started_adjustments() {
        let layered = Manifest::layered(None).expect("the embedded manifest");
        let mut started = Manifest::from_layers(&layered).expect("valid");
        started.endpoints.clear(); // an adjustment made after loading (like `axle demo`)
        let rule = "[governance]\nretries = 0\n[methods.get]\ntimeout-ms = 77\n";
        let ruled = axle::manifest::rules::apply(&layered, "kv", rule).expect("a good rule");
        let in_force = BTreeMap::from([("kv".to_string(), (5, ruled))]);
        let m = with_rules(&started, &in_force);
        assert_eq!(m.governance("kv", "get").timeout_ms, 77);
        assert_eq!(m.governance("kv", "other").retries, 0);
        // kv's other declared method keeps its manifest tier; other services are untouched.
        assert!(!m.governance("kv", "put").idempotent);
        assert!(m.governance("echo", "say").idempotent);
        assert_eq!(m.governance("echo", "say").retries, 2);
        assert!(m.endpoints.is_empty());
        // A route and weights come along; another service's routers stay.
        let rule = "[route]\nrules = [\"=> version = 2.*\"]\n[weights]\n\"127.0.0.1:9\" = 5\n";
        let ruled = axle::manifest::rules::apply(&layered, "kv", rule).expect("a good rule");
        let in_force = BTreeMap::from([("kv".to_string(), (6, ruled))]);
        let m = with_rules(&started, &in_force);
        let routers = m.slots_for("kv").routers.unwrap_or_default();
        assert_eq!(routers, ["rule.route.kv", "tag"]);
        assert!(m.plugins.contains_key("rule.route.kv"));
        assert_eq!(m.weight_overrides["kv"]["127.0.0.1:9"], 5);
        assert_eq!(m.slots_for("echo").routers.unwrap_or_default(), ["tag"]);
        // No rule in force: the started manifest's tiers again.
        let plain = with_rules(&started, &BTreeMap::new());
        assert_eq!(plain.governance("kv", "other").retries, 2);
        assert_eq!(plain.governance("kv", "get").timeout_ms, 1000);
    }
}
