//! ROUTE = FILTER: narrows the service's endpoints with its router plugins, once per
//! request shape (method, tags, consumer app). The answer is memoised as a candidate set
//! the selector already knows, so a call costs a hash lookup here, not a plugin call.

use crate::client::registry::{RouteKey, ServiceState};
use crate::client::{CallError, CallOptions};
use crate::plugin::kinds::router::RouteRequest;

/// The candidate set for this request.
pub fn candidates(svc: &ServiceState, method: &str, options: &CallOptions) -> Result<u32, CallError> {
    if svc.routers.is_empty() {
        return Ok(svc.all_set);
    }
    let key = RouteKey {
        method: method.to_string(),
        tags: options.tags.clone(),
        consumer_app: options.consumer_app.clone().unwrap_or_default(),
    };
    if let Some(set) = svc.memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(*set);
    }
    let request = RouteRequest {
        service: svc.name.clone(),
        method: key.method.clone(),
        tags: key.tags.clone(),
        consumer_app: key.consumer_app.clone(),
    };
    let mut left = svc.members.clone();
    for router in &svc.routers {
        left = router.route(&left, &request).endpoints;
    }
    if left.is_empty() {
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: format!("no endpoint matches the route (tags {:?})", options.tags),
        });
    }
    let set = svc.selector.intern_set(&left);
    svc.memo
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, set);
    Ok(set)
}
