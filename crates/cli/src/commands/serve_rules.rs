//! `axle serve` follows its services' run-time rules for their `[limits]` (`axle rules`,
//! `axle_manifest::rules_limits`): each new version is checked as every rule is
//! (`rules::apply`), the limits of every service are laid over the manifest the provider
//! started from, and the limiter is swapped to the result — which loads it, so its
//! `init` checks the values — with the state handoff of any swap. A version that fails
//! either check is refused and the limits in force stay. Governance, routes and weights
//! in a rule are the callers' business; a provider takes only the limits.
//!
//! Prints `rule of SERVICE: limits applied (revision N)` or `rule of SERVICE: refused
//! revision N: WHY` on stdout, for whoever runs it (and the tests, which wait for it), and
//! records the same in a [`RuleBook`] that `axle stats --admin` shows per server.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axle::client::rules::{RefusedRule, RuleBook, RuleStatus};
use axle::discovery::rules::{RuleVersion, Rules};
use axle::manifest::rules_limits::{lay, limits_of, Limits};
use axle::manifest::{Layered, Manifest};
use axle::swap::Swapper;

/// Following the rules; stops when dropped.
pub type LimitRules = super::rules_watch::Following;

struct Applier {
    swapper: Arc<Swapper>,
    layered: Layered,
    started: Manifest,
    /// Per service, the limits in force (a rule without `[limits]` has none).
    in_force: Mutex<BTreeMap<String, Limits>>,
    /// What `stats` shows: the revision in force and the last refused, per service.
    book: RuleBook,
}

/// Applies each service's current rule, then follows them.
pub async fn start(
    swapper: Arc<Swapper>,
    rules: Rules,
    layered: Layered,
    started: Manifest,
    services: Vec<String>,
    book: RuleBook,
) -> anyhow::Result<LimitRules> {
    let applier = Arc::new(Applier {
        swapper,
        layered,
        started,
        in_force: Mutex::new(BTreeMap::new()),
        book,
    });
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
    /// Takes `version`'s limits for `service` if the rule checks and the limiter loads
    /// with them; otherwise keeps the limits in force and says why.
    fn version(&self, service: &str, version: Option<&RuleVersion>) {
        let revision = version.map_or(0, |v| v.revision);
        let limits = match version.filter(|v| !v.text.is_empty()) {
            None => None,
            Some(v) => match limits_of(&self.layered, service, &v.text) {
                Ok(limits) => limits,
                Err(e) => return self.refused(service, revision, e.to_string()),
            },
        };
        let mut in_force = self.in_force.lock().unwrap_or_else(|e| e.into_inner());
        if in_force.get(service) != limits.as_ref() {
            let mut next = in_force.clone();
            match limits {
                Some(l) => next.insert(service.to_string(), l),
                None => next.remove(service),
            };
            let mut manifest = self.started.clone();
            for (s, l) in &next {
                if let Err(e) = lay(&mut manifest, s, l) {
                    return self.refused(service, revision, e.to_string());
                }
            }
            if let Err(e) = self.swapper.swap_to(manifest) {
                return self.refused(service, revision, format!("{e:#}"));
            }
            *in_force = next;
            say(service, &format!("limits applied (revision {revision})"));
        }
        self.book.set(RuleStatus {
            service: service.to_string(),
            revision: version.map(|v| v.revision),
            refused: None,
        });
    }

    /// `revision` is refused: the rule in force stays, and `stats` says why.
    fn refused(&self, service: &str, revision: i64, error: String) {
        say(service, &format!("refused revision {revision}: {error}"));
        let mut status = self.book.get(service);
        status.refused = Some(RefusedRule { revision, error });
        self.book.set(status);
    }
}

fn say(service: &str, what: &str) {
    if what.starts_with("refused") {
        tracing::warn!(service, "{what}");
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "rule of {service}: {what}");
    let _ = out.flush();
}
