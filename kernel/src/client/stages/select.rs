//! BALANCE = SELECT: the selector plugin picks one member of the candidate set (the
//! kernel falls back to a uniform random member when the plugin fails).

use crate::client::registry::ServiceState;
use crate::client::{CallError, CallOptions};

/// The endpoint for this attempt.
pub fn pick(svc: &ServiceState, set: u32, options: &CallOptions) -> Result<u32, CallError> {
    svc.selector
        .select(set, options.hash_key)
        .map(|s| s.endpoint)
        .ok_or_else(|| CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: "the service has no endpoints".into(),
        })
}
