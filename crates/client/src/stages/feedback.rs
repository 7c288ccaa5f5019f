//! Outcomes fed back: the kernel's per-endpoint facts (in-flight, latency EWMA, window)
//! and the selector plugin (batched).

use std::time::Instant;

use crate::state::Endpoint;
use crate::{CallError, Reply};
use axle_governance::breaker::{Permit, Verdict};
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_spi::{Outcome, OutcomeClass};
use axle_transport::TransportError;
use axle_wire::ErrorClass;

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

/// How an attempt's result counts for a circuit breaker (see `governance::breaker`).
pub fn verdict(result: &Result<Reply, CallError>, slow: bool) -> Verdict {
    match classify(result) {
        OutcomeClass::Success => Verdict::Success { slow },
        OutcomeClass::Timeout | OutcomeClass::Failure => Verdict::Failure,
        OutcomeClass::Rejected => Verdict::Ignored,
    }
}

/// Records the outcome of an attempt that [`started`]. Returns whether it showed the
/// endpoint unreachable for the first time (a refused connect): the caller then has the
/// rotation recomputed at once rather than at the next health tick.
pub fn finished(
    selector: &SelectorPlugin,
    ep: &Endpoint,
    permit: Permit,
    started: Instant,
    result: &Result<Reply, CallError>,
) -> bool {
    let elapsed = started.elapsed();
    let latency_ns = elapsed.as_nanos() as u64;
    ep.breaker
        .record(permit, verdict(result, ep.breaker.is_slow(elapsed)));
    let class = classify(result);
    ep.cell.finished(latency_ns, class);
    selector.feedback(&Outcome {
        endpoint: ep.id,
        class,
        latency_ns,
    });
    matches!(
        result,
        Err(CallError::Transport(TransportError::Connect { .. }))
    ) && ep.health.mark_unreachable()
}
