//! Fallback: when a call finally fails for a reason the caller could not help (breaker
//! open, no endpoint, retries exhausted, deadline, overload), answer the manifest's static
//! value or the answer of another service/method instead — marked, so the caller can tell.
//! A business error, a bad request or a forbidden call is the caller's answer, never hidden.

use crate::CallError;

/// Whether `err` may be replaced by a fallback.
pub fn applies(err: &CallError) -> bool {
    use axle_wire::ErrorClass::*;
    match err {
        CallError::Remote { class, .. } => matches!(
            class,
            Overloaded | ShuttingDown | RateLimited | DeadlineExceeded | Internal
        ),
        CallError::Transport(_) | CallError::NoEndpoint { .. } | CallError::BreakerOpen { .. } => {
            true
        }
        _ => false,
    }
}
