//! BALANCE = SELECT: the selector plugin picks one member of the candidate set (the
//! kernel falls back to a uniform random member when the plugin fails). Endpoints this call
//! already tried, and endpoints whose breaker is open, are excluded: a new set without them
//! is defined on this rare path.

use super::route::Candidates;
use crate::client::registry::{Registry, ServiceState};
use crate::client::{CallError, CallOptions};
use crate::governance::breaker::Permit;
use crate::plugin::kinds::selector::SelectorPlugin;

/// The endpoint for this attempt, and its breaker permit.
pub fn pick(
    registry: &Registry,
    svc: &ServiceState,
    selector: &SelectorPlugin,
    candidates: &Candidates,
    excluded: &mut Vec<u32>,
    options: &CallOptions,
) -> Result<(u32, Permit), CallError> {
    loop {
        let set = if excluded.is_empty() {
            candidates.set
        } else {
            let left: Vec<u32> = candidates
                .members
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
            selector.intern_set(&left)
        };
        // No answer means the set was forgotten with an older table: the caller routes
        // again on the current rotation.
        let id = selector
            .select(set, options.hash_key)
            .map(|s| s.endpoint)
            .ok_or_else(|| CallError::NoEndpoint {
                service: svc.name.clone(),
                reason: "the endpoints changed during the call".into(),
            })?;
        let Some(ep) = registry.endpoint(id) else {
            return Err(CallError::NoEndpoint {
                service: svc.name.clone(),
                reason: format!("the selector picked unknown endpoint {id}"),
            });
        };
        match ep.breaker.try_acquire() {
            Permit::Rejected => excluded.push(id),
            permit => return Ok((id, permit)),
        }
    }
}
