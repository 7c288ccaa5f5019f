//! The provider's governance per method: internal-only methods answer `forbidden` to
//! requests marked external; the concurrency guard and the fuse answer `overloaded` (the
//! handler did not run, so the caller fails over without counting a failure).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::stats::{MethodStats, MethodView};
use crate::Context;
use axle_governance::guard::{Guard, Refusal};
use axle_manifest::Manifest;
use axle_wire::{ErrorClass, Frame};

/// One method's protections, and its counters (looked up once per request, together).
pub struct MethodGuard {
    /// The service and method this entry counts, as bounded names: a method no handler
    /// serves, or one past the table's bound, is `*`. The limiter keys on these, never on
    /// a name the caller chose freely.
    pub service: Arc<str>,
    pub method: Arc<str>,
    pub guard: Guard,
    pub internal_only: bool,
    pub stats: MethodStats,
}

/// Methods counted one by one. Callers choose method names (a service served by one
/// handler for every method takes any name), so past this many, new names of a service
/// share its `*` entry instead of growing the table without bound.
const MAX_METHODS: usize = 1024;

/// The entry of requests naming no method served here (`*/*`): their names are the
/// caller's to invent, so they are counted together.
const ANY: &str = "*";

/// Every method's protections, resolved from the manifest's tiers on first use.
pub struct Guards {
    manifest: Option<Arc<Manifest>>,
    by_method: RwLock<FxHashMap<String, FxHashMap<String, Arc<MethodGuard>>>>,
}

impl Guards {
    pub fn new(manifest: Option<Arc<Manifest>>) -> Self {
        Guards {
            manifest,
            by_method: RwLock::new(FxHashMap::default()),
        }
    }

    /// The protections of `service/method`; `served`: whether a handler serves it here.
    pub fn of(&self, service: &str, method: &str, served: bool) -> Arc<MethodGuard> {
        let (service, method) = if served {
            (service, method)
        } else {
            (ANY, ANY)
        };
        if let Some(g) = self
            .by_method
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(service)
            .and_then(|m| m.get(method))
        {
            return g.clone();
        }
        let mut all = self.by_method.write().unwrap_or_else(|e| e.into_inner());
        let exists = all.get(service).is_some_and(|m| m.contains_key(method));
        let full = all.values().map(|m| m.len()).sum::<usize>() >= MAX_METHODS;
        let method = if !exists && full { ANY } else { method };
        let governance = self
            .manifest
            .as_ref()
            .map(|m| m.governance(service, method))
            .unwrap_or_default();
        all.entry(service.to_string())
            .or_default()
            .entry(method.to_string())
            .or_insert_with(|| {
                Arc::new(MethodGuard {
                    service: service.into(),
                    method: method.into(),
                    guard: Guard::new(&governance),
                    internal_only: governance.internal_only,
                    stats: MethodStats::default(),
                })
            })
            .clone()
    }

    /// Every method's counters, by service then method, for people.
    pub fn views(&self) -> Vec<MethodView> {
        let all = self.by_method.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<MethodView> = all
            .iter()
            .flat_map(|(s, methods)| {
                methods.iter().map(move |(m, g)| {
                    g.stats
                        .view(s, m, g.guard.in_flight(), g.guard.max_seen.load(Relaxed))
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.service, &a.method).cmp(&(&b.service, &b.method)));
        out
    }
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

    #[test]
    fn caller_invented_names_cannot_grow_the_table_without_bound() {
        let guards = Guards::new(None);
        for i in 0..MAX_METHODS + 10 {
            guards.of("echo", &format!("m{i}"), true).stats.received();
        }
        for i in 0..10 {
            guards.of(&format!("nope{i}"), "x", false).stats.received();
        }
        let views = guards.views();
        assert_eq!(views.len(), MAX_METHODS + 2, "the cap, `echo/*` and `*/*`");
        let folded = views
            .iter()
            .find(|v| v.service == "echo" && v.method == ANY);
        assert_eq!(
            folded.map(|v| v.requests),
            Some(10),
            "the names past the cap"
        );
        let unknown = views.iter().find(|v| v.service == ANY).map(|v| v.requests);
        assert_eq!(unknown, Some(10));
        // A method counted before the table filled keeps its own entry.
        guards.of("echo", "m0", true).stats.received();
        let m0 = guards
            .views()
            .into_iter()
            .find(|v| v.method == "m0")
            .map(|v| v.requests);
        assert_eq!(m0, Some(2));
    }
}
