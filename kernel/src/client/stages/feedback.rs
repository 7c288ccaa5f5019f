//! Outcomes fed back: the kernel's per-endpoint facts (in-flight, latency EWMA, window)
//! and the selector plugin (batched).

use std::time::Instant;

use crate::client::registry::{Endpoint, ServiceState};
use crate::client::{CallError, Reply};
use crate::plugin::bindings::wit::{Outcome, OutcomeClass};
use crate::transport::TransportError;
use crate::wire::ErrorClass;

/// Marks a request as in flight; returns when it started (`now`, read once per call by
/// the caller).
pub fn started(ep: &Endpoint, now: Instant) -> Instant {
    ep.cell.started();
    now
}

/// How an attempt's result counts for the endpoint.
pub fn classify(result: &Result<Reply, CallError>) -> OutcomeClass {
    match result {
        Ok(_) => OutcomeClass::Success,
        Err(CallError::Remote { class, .. }) => match class {
            ErrorClass::Business => OutcomeClass::Success,
            ErrorClass::DeadlineExceeded => OutcomeClass::Timeout,
            ErrorClass::Internal => OutcomeClass::Failure,
            _ => OutcomeClass::Rejected,
        },
        Err(CallError::Transport(TransportError::Timeout)) => OutcomeClass::Timeout,
        Err(CallError::Transport(_)) => OutcomeClass::Failure,
        Err(_) => OutcomeClass::Rejected,
    }
}

/// Records the outcome of an attempt that [`started`].
pub fn finished(
    svc: &ServiceState,
    ep: &Endpoint,
    started: Instant,
    result: &Result<Reply, CallError>,
) {
    let latency_ns = started.elapsed().as_nanos() as u64;
    let class = classify(result);
    let fault = matches!(class, OutcomeClass::Timeout | OutcomeClass::Failure);
    ep.cell.finished(latency_ns, fault);
    svc.selector.feedback(Outcome {
        endpoint: ep.id,
        class,
        latency_ns,
    });
}
