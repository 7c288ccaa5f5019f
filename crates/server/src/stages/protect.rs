//! The provider's governance per method: internal-only methods answer `forbidden` to
//! requests marked external; the concurrency guard and the fuse answer `overloaded` (the
//! handler did not run, so the caller fails over without counting a failure).
//!
//! Entries are keyed by *declared* methods only: a method the manifest names
//! (`[services.S.methods.M]`) or one a handler is registered for exactly. Their number is
//! bounded by the manifest and the code, not by callers, so each has its own entry, made
//! when the server is built. Every other name a service's catch-all handler serves shares
//! the service's `S/*` entry (the service tier's governance), and every name no handler
//! serves shares `*/*`: whatever names callers send, the table never grows and no name
//! they choose displaces a declared method's policy.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::stats::{MethodStats, MethodView};
use crate::Context;
use axle_governance::guard::{Guard, Refusal};
use axle_governance::{Governance, Tier};
use axle_manifest::Manifest;
use axle_wire::{ErrorClass, Frame};

/// One method's protections, and its counters (looked up once per request, together).
pub struct MethodGuard {
    /// The service and method this entry counts, as bounded names: a declared method's
    /// own, `*` for a name only a catch-all serves, `*/*` for one no handler serves. The
    /// limiter keys on these, never on a name the caller chose freely.
    pub service: Arc<str>,
    pub method: Arc<str>,
    pub guard: Guard,
    pub internal_only: bool,
    /// The longest budget a request may bring, and the budget of one that brings none.
    pub max_deadline: std::time::Duration,
    pub default_deadline: std::time::Duration,
    /// Whether the handler is cancelled when its caller's connection closes (never for a
    /// deduplicated method: its repeat is waiting for the answer).
    pub cancel_on_disconnect: bool,
    /// The requests it ran, by request id (`dedup-ttl-ms`).
    pub dedup: Option<super::dedup::Dedup>,
    pub stats: MethodStats,
}

impl MethodGuard {
    fn new(service: &str, method: &str, governance: &Governance) -> Self {
        MethodGuard {
            service: service.into(),
            method: method.into(),
            guard: Guard::new(governance),
            internal_only: governance.internal_only,
            max_deadline: std::time::Duration::from_millis(governance.max_deadline_ms),
            default_deadline: std::time::Duration::from_millis(governance.default_deadline_ms),
            cancel_on_disconnect: governance.cancel_on_disconnect && governance.dedup_ttl_ms == 0,
            dedup: super::dedup::Dedup::of(governance),
            stats: MethodStats::new(governance.monitor),
        }
    }
}

/// The name of the shared entries: `S/*` (a catch-all serves the name, the manifest does
/// not declare it) and `*/*` (no handler serves it).
pub const ANY: &str = "*";

/// Every method's protections, resolved from the manifest's tiers when the server is
/// built; read without a lock and never written after.
pub struct Guards {
    /// Declared methods, by service then method.
    declared: FxHashMap<String, FxHashMap<String, MethodGuard>>,
    /// `S/*`, one per service a catch-all handler serves.
    shared: FxHashMap<String, MethodGuard>,
    /// `*/*`.
    unserved: MethodGuard,
    /// Whether any entry lets its handler outlive its caller's connection (when none
    /// does, the transport's per-request question is answered without a lookup).
    pub any_keeps_running: bool,
}

impl Guards {
    /// The entries of a server whose handlers are registered for exactly `methods`
    /// (service, method) and, for every method, for the services in `catch_all`.
    pub fn new<'a>(
        manifest: Option<&Manifest>,
        methods: impl IntoIterator<Item = (&'a str, &'a str)>,
        catch_all: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let catch_all: Vec<&str> = catch_all.into_iter().collect();
        let method_tier =
            |s: &str, m: &str| manifest.map(|man| man.governance(s, m)).unwrap_or_default();
        let mut declared: FxHashMap<String, FxHashMap<String, MethodGuard>> = FxHashMap::default();
        let mut declare = |s: &str, m: &str| {
            declared
                .entry(s.to_string())
                .or_default()
                .entry(m.to_string())
                .or_insert_with(|| MethodGuard::new(s, m, &method_tier(s, m)));
        };
        for (s, m) in methods {
            declare(s, m);
        }
        // A method the manifest declares has an entry where a handler serves it: here
        // only a catch-all can (an exact handler declared it above).
        if let Some(man) = manifest {
            for (s, m) in man.method_governance.keys() {
                if catch_all.contains(&s.as_str()) {
                    declare(s, m);
                }
            }
        }
        let shared = catch_all
            .iter()
            .map(|s| {
                let g = service_tier(manifest, s);
                (s.to_string(), MethodGuard::new(s, ANY, &g))
            })
            .collect();
        let shared: FxHashMap<String, MethodGuard> = shared;
        let any_keeps_running = declared
            .values()
            .flat_map(|m| m.values())
            .chain(shared.values())
            .any(|g| !g.cancel_on_disconnect);
        Guards {
            declared,
            shared,
            any_keeps_running,
            // Answered `not_found` before any protection runs: only its counters matter.
            unserved: MethodGuard::new(ANY, ANY, &Governance::default()),
        }
    }

    /// The protections of `service/method`; `served`: whether a handler serves it here.
    pub fn of(&self, service: &str, method: &str, served: bool) -> &MethodGuard {
        if !served {
            return &self.unserved;
        }
        if let Some(g) = self.declared.get(service).and_then(|m| m.get(method)) {
            return g;
        }
        // Served but not declared: only a catch-all serves such a name.
        self.shared.get(service).unwrap_or(&self.unserved)
    }

    /// The counters of every entry that has seen a request, by service then method, for
    /// people.
    pub fn views(&self) -> Vec<MethodView> {
        let all = self
            .declared
            .values()
            .flat_map(|methods| methods.values())
            .chain(self.shared.values())
            .chain([&self.unserved]);
        let mut out: Vec<MethodView> = all
            .map(|g| {
                let mut view = g.stats.view(
                    &g.service,
                    &g.method,
                    g.guard.in_flight(),
                    g.guard.max_seen.load(Relaxed),
                );
                view.repeats_answered = g.dedup.as_ref().map_or(0, |d| d.repeats());
                view
            })
            .filter(|v| v.requests > 0)
            .collect();
        out.sort_by(|a, b| (&a.service, &a.method).cmp(&(&b.service, &b.method)));
        out
    }

    /// How many entries there are (declared methods, services a catch-all serves, and
    /// `*/*`): fixed when the server is built.
    pub fn entries(&self) -> usize {
        self.declared.values().map(|m| m.len()).sum::<usize>() + self.shared.len() + 1
    }
}

/// The global and service tiers of `service` (a method tier never applies to a shared
/// entry, whatever the method is called).
fn service_tier(manifest: Option<&Manifest>, service: &str) -> Governance {
    let Some(m) = manifest else {
        return Governance::default();
    };
    let mut tiers = vec![(Tier::Global, &m.governance)];
    if let Some(layer) = m.service_governance.get(service) {
        tiers.push((Tier::Service, layer));
    }
    axle_governance::resolve(&tiers).0
}

/// Checks internal-only; `Err` is the refusal.
pub fn check_internal(
    g: &MethodGuard,
    external: bool,
    ctx: &Context,
    id: u64,
) -> Result<(), Box<Frame>> {
    if g.internal_only && external {
        return Err(Box::new(Frame::error(
            id,
            ErrorClass::Forbidden,
            format!("{}/{} is internal-only", ctx.service, ctx.method),
        )));
    }
    Ok(())
}

/// The refusal frame of a guard or fuse.
pub fn refusal(r: Refusal, ctx: &Context, id: u64) -> Frame {
    let why = match r {
        Refusal::Overloaded => "too many requests in flight",
        Refusal::Fused => "fused after repeated unexpected errors",
    };
    Frame::error(
        id,
        ErrorClass::Overloaded,
        format!("{}/{}: {why}", ctx.service, ctx.method),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Manifest {
        Manifest::parse(text, "test.toml", std::path::Path::new("/")).expect("valid manifest")
    }

    const DECLARED: &str = "\
[governance]
max-concurrent = 100
[services.echo.governance]
max-concurrent = 50
[services.echo.methods.slow]
internal-only = true
max-concurrent = 1
[services.kv.methods.get]
max-concurrent = 3
[services.gone.methods.x]
internal-only = true
";

    #[test]
    fn caller_invented_names_share_one_entry_and_never_displace_a_declared_method() {
        let m = manifest(DECLARED);
        let guards = Guards::new(Some(&m), [("kv", "get"), ("kv", "put")], ["echo"]);
        // echo/slow (the manifest; a catch-all serves it), kv/get, kv/put (handlers),
        // echo/* and */*. gone/x is declared but nothing serves it: no entry.
        assert_eq!(guards.entries(), 5);
        for i in 0..5_000 {
            let g = guards.of("echo", &format!("m{i}"), true);
            assert_eq!((&*g.service, &*g.method), ("echo", ANY));
            g.stats.received();
        }
        for i in 0..10 {
            guards.of(&format!("nope{i}"), "x", false).stats.received();
        }
        assert_eq!(guards.entries(), 5, "the table did not grow");
        // The declared method keeps its own policy, whatever came before.
        let slow = guards.of("echo", "slow", true);
        assert_eq!((&*slow.service, &*slow.method), ("echo", "slow"));
        assert!(slow.internal_only);
        let first = slow.guard.enter().expect("one in flight");
        assert!(
            slow.guard.enter().is_err(),
            "max-concurrent = 1 still holds"
        );
        drop(first);
        // The shared entry has the service tier's settings, never a method's.
        let shared = guards.of("echo", "m0", true);
        assert!(!shared.internal_only);
        let held: Vec<_> = (0..50).map(|_| shared.guard.enter().unwrap()).collect();
        assert!(shared.guard.enter().is_err(), "the service tier's 50");
        drop(held);
        // A method a handler is registered for is declared, in the manifest or not.
        assert_eq!(&*guards.of("kv", "put", true).method, "put");
        let get = guards.of("kv", "get", true);
        let held: Vec<_> = (0..3).map(|_| get.guard.enter().unwrap()).collect();
        assert!(get.guard.enter().is_err(), "kv/get's method tier");
        drop(held);

        let views = guards.views();
        let rows: Vec<(&str, &str, u64)> = views
            .iter()
            .map(|v| (v.service.as_str(), v.method.as_str(), v.requests))
            .collect();
        assert_eq!(
            rows,
            [("*", "*", 10), ("echo", "*", 5_000)],
            "entries without requests are not shown"
        );
    }

    #[test]
    fn without_a_manifest_handlers_alone_declare() {
        let guards = Guards::new(None, [("kv", "get")], ["echo"]);
        assert_eq!(guards.entries(), 3);
        assert_eq!(&*guards.of("kv", "get", true).method, "get");
        assert_eq!(&*guards.of("echo", "get", true).method, ANY);
        let nope = guards.of("kv", "nope", false);
        assert_eq!((&*nope.service, &*nope.method), (ANY, ANY));
        assert!(
            !guards.any_keeps_running,
            "handlers are cancelled by default"
        );
    }

    #[test]
    fn a_method_that_outlives_its_caller_is_known_up_front() {
        let m = manifest("[services.kv.methods.put]\ncancel-on-disconnect = false\n");
        let guards = Guards::new(Some(&m), [("kv", "get"), ("kv", "put")], []);
        assert!(guards.any_keeps_running);
        assert!(!guards.of("kv", "put", true).cancel_on_disconnect);
        assert!(guards.of("kv", "get", true).cancel_on_disconnect);
    }
}
