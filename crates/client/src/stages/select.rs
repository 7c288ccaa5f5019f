//! BALANCE = SELECT: the selector plugin picks one member of the candidate set (the
//! kernel falls back to a uniform random member when the plugin fails). Endpoints this call
//! already tried, and endpoints whose breaker is open, are excluded: a new set without them
//! is defined on this rare path.

use super::feedback::Attempt;
use super::route::Candidates;
use crate::state::{ClientState, ServiceState};
use crate::{CallError, CallOptions};
use axle_governance::breaker::Permit;

/// The endpoints a call has tried (or found refusing), in order. A call tries one
/// endpoint almost always and a few when failing over: inline, so the steady state does
/// not allocate a list per call; more spill to the heap.
pub type Tried = smallvec::SmallVec<[u32; 4]>;
use axle_plugin_host::kinds::selector::SelectorPlugin;

/// The attempt at the endpoint picked: the endpoint, borrowed from the call's rotation
/// (which holds it, so it outlives a removal mid-call), with its breaker permit, given
/// back if the attempt is dropped.
pub fn pick<'a>(
    state: &ClientState,
    svc: &ServiceState,
    selector: &SelectorPlugin,
    candidates: &Candidates<'a>,
    excluded: &mut Tried,
    options: &CallOptions,
) -> Result<Attempt<'a>, CallError> {
    let attempt = live(svc, selector, candidates, excluded, options)?;
    // A sampled call's first pick is shown to the shadow selector (never a failover's:
    // the shadow is asked what it would have chosen first).
    if let (Some(shadows), true) = (&candidates.shadow, excluded.is_empty()) {
        let picked = attempt.ep.id;
        super::shadow::select(state, shadows, candidates, options.hash_key, picked);
    }
    Ok(attempt)
}

/// The live selector's pick.
fn live<'a>(
    svc: &ServiceState,
    selector: &SelectorPlugin,
    candidates: &Candidates<'a>,
    excluded: &mut Tried,
    options: &CallOptions,
) -> Result<Attempt<'a>, CallError> {
    loop {
        let set = if excluded.is_empty() {
            candidates.set
        } else {
            selector.intern_set(&remaining(svc, candidates, excluded)?)
        };
        // No answer means the set was forgotten: a new table is being published while
        // this call holds the old rotation. The kind's safe default then picks: uniformly
        // among the candidates not yet excluded (one that left the client meanwhile is
        // excluded below).
        let id = match selector.select(set, options.hash_key) {
            Some(s) => s.endpoint,
            None => {
                let left = remaining(svc, candidates, excluded)?;
                left[fastrand::usize(..left.len())]
            }
        };
        if excluded.contains(&id) {
            return Err(CallError::NoEndpoint {
                service: svc.name.clone(),
                reason: format!("the selector picked endpoint {id} outside the candidates"),
            });
        }
        let Some(ep) = candidates.endpoint(id) else {
            // Not in the call's rotation: the selector answered from a newer table than
            // the one this call routed with (a new one was published meanwhile).
            excluded.push(id);
            continue;
        };
        match ep.breaker.try_acquire() {
            Permit::Rejected => excluded.push(id),
            permit => return Ok(Attempt::new(ep, permit)),
        }
    }
}

/// The attempt at endpoint `id` again (a lost answer of a deduplicated method): only if it
/// is a candidate and its breaker lets a request through.
pub fn again<'a>(candidates: &Candidates<'a>, id: u32) -> Option<Attempt<'a>> {
    if !candidates.members().contains(&id) {
        return None;
    }
    let ep = candidates.endpoint(id)?;
    match ep.breaker.try_acquire() {
        Permit::Rejected => None,
        permit => Some(Attempt::new(ep, permit)),
    }
}

/// The candidates not excluded yet; an error when none is left.
fn remaining(
    svc: &ServiceState,
    candidates: &Candidates,
    excluded: &[u32],
) -> Result<Vec<u32>, CallError> {
    let left: Vec<u32> = candidates
        .members()
        .iter()
        .copied()
        .filter(|id| !excluded.contains(id))
        .collect();
    if left.is_empty() {
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: "every endpoint was tried or has its breaker open".into(),
        });
    }
    Ok(left)
}
