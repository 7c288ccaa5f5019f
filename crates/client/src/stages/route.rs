//! HEALTH FILTER, then ROUTE = FILTER: starts from the service's rotation (the endpoints
//! health admits, see `health::rotation`) and narrows it with the router plugins, once per
//! request shape (method policy, tags, consumer app) and rotation. The answer is memoised
//! in the method's policy as a candidate set the selector already knows, so a call costs a
//! short scan here, not a plugin call. Methods the manifest does not declare share one
//! policy, so routers are asked about them as `*` and one memo serves them all.

use std::sync::Arc;

use crate::state::{MethodPolicy, RouteMemo, ServiceState};
use crate::{CallError, CallOptions};
use axle_plugin_host::kinds::router::RouteRequest;

/// Request shapes remembered per method policy.
const MAX_SHAPES_PER_METHOD: usize = 256;

/// The candidates of a request: the selector's set id and its members.
#[derive(Clone)]
pub struct Candidates {
    pub set: u32,
    pub members: Arc<[u32]>,
}

/// The candidate set for this request.
pub fn candidates(
    svc: &ServiceState,
    policy: &MethodPolicy,
    options: &CallOptions,
) -> Result<Candidates, CallError> {
    let rotation = svc.rotation.load();
    let generation = rotation.generation;
    if rotation.members.is_empty() {
        let listed = svc.members.load().len();
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: if listed == 0 {
                "the service has no endpoints".into()
            } else {
                format!("none of its {listed} endpoints is reachable")
            },
        });
    }
    let slots = svc.slots.load();
    if slots.routers.is_empty() {
        if let Some(set) = rotation.set_in(&policy.selector) {
            return Ok(Candidates {
                set,
                members: rotation.members.clone(),
            });
        }
    }
    let app = options.consumer_app.as_deref().unwrap_or("");
    {
        let memo = policy.memo.load();
        let hit = memo.iter().find(|m| {
            m.generation == generation && m.tags == options.tags && m.consumer_app == app
        });
        if let Some(m) = hit {
            return Ok(Candidates {
                set: m.set,
                members: m.members.clone(),
            });
        }
    }
    let request = RouteRequest {
        service: svc.name.clone(),
        method: policy.method.to_string(),
        tags: options.tags.clone(),
        consumer_app: app.to_string(),
    };
    let mut left = rotation.members.to_vec();
    for router in &slots.routers {
        left = router.route(&left, &request).endpoints;
    }
    if left.is_empty() {
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: format!("no endpoint matches the route (tags {:?})", options.tags),
        });
    }
    // The memo is per policy, and a policy has one selector: sets never mix plugins.
    let set = policy.selector.intern_set(&left);
    let members: Arc<[u32]> = left.into();
    // Bounded: request shapes come from callers; past this many per method, routes are
    // recomputed rather than remembered. (Two callers racing on a new shape may both
    // compute it; the answer is the same, and one copy is kept.)
    let memo = RouteMemo {
        generation,
        tags: request.tags,
        consumer_app: request.consumer_app,
        set,
        members: members.clone(),
    };
    policy.memo.rcu(|shapes| {
        let known = shapes.iter().any(|m| {
            m.generation == memo.generation
                && m.tags == memo.tags
                && m.consumer_app == memo.consumer_app
        });
        if known || shapes.len() >= MAX_SHAPES_PER_METHOD {
            return Arc::clone(shapes);
        }
        // Entries of older rotations are dropped as newer ones arrive.
        let mut grown: Vec<RouteMemo> = shapes
            .iter()
            .filter(|m| m.generation == memo.generation)
            .cloned()
            .collect();
        grown.push(memo.clone());
        Arc::new(grown)
    });
    Ok(Candidates { set, members })
}
