//! The provider's governance per method: internal-only methods answer `forbidden` to
//! requests marked external; the concurrency guard and the fuse answer `overloaded` (the
//! handler did not run, so the caller fails over without counting a failure).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::governance::guard::{Guard, Refusal};
use crate::manifest::Manifest;
use crate::server::stats::{MethodStats, MethodView};
use crate::server::Context;
use crate::wire::{ErrorClass, Frame};

/// One method's protections, and its counters (looked up once per request, together).
pub struct MethodGuard {
    pub guard: Guard,
    pub internal_only: bool,
    pub stats: MethodStats,
}

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

    /// The protections of `service/method`.
    pub fn of(&self, service: &str, method: &str) -> Arc<MethodGuard> {
        if let Some(g) = self
            .by_method
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(service)
            .and_then(|m| m.get(method))
        {
            return g.clone();
        }
        let governance = self
            .manifest
            .as_ref()
            .map(|m| m.governance(service, method))
            .unwrap_or_default();
        let mut all = self.by_method.write().unwrap_or_else(|e| e.into_inner());
        all.entry(service.to_string())
            .or_default()
            .entry(method.to_string())
            .or_insert_with(|| {
                Arc::new(MethodGuard {
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
