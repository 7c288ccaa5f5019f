//! Outcomes fed back: the kernel's per-endpoint facts (in-flight, latency EWMA, window),
//! the endpoint's breaker and the selector plugin (batched).
//!
//! An [`Attempt`] holds what an attempt took — the endpoint's breaker permit from the
//! pick, its in-flight count from the send — and gives it back whichever way the attempt
//! ends: with an outcome ([`Attempt::finish`]), or dropped without one (a hedge's loser,
//! a caller's timeout or dropped call future; the connection sends the `cancel` frame).

use std::sync::Arc;
use std::time::Instant;

use crate::state::Endpoint;
use crate::{CallError, Reply};
use axle_governance::breaker::{Permit, Verdict};
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_spi::{Outcome, OutcomeClass};
use axle_transport::TransportError;
use axle_wire::ErrorClass;

/// One attempt at one endpoint, from its pick to its outcome. The endpoint is borrowed
/// from the call's rotation, which holds it to the end of the call.
pub struct Attempt<'a> {
    pub ep: &'a Arc<Endpoint>,
    permit: Permit,
    /// When the request was sent (it is in flight from then on).
    sent: Option<Instant>,
    /// Whether the permit and the in-flight count were given back.
    settled: bool,
}

/// What an attempt's outcome says about its endpoint, beyond the facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Nothing new.
    Nothing,
    /// A refused connect showed it unreachable, for the first time.
    Unreachable,
    /// It is going away gracefully (`shutting_down`, or its connection is draining).
    GoingAway,
}

impl<'a> Attempt<'a> {
    /// An attempt holding `permit` of `ep`'s breaker.
    pub fn new(ep: &'a Arc<Endpoint>, permit: Permit) -> Attempt<'a> {
        Attempt {
            ep,
            permit,
            sent: None,
            settled: false,
        }
    }

    /// The request is on its way (`now`, read once per attempt by the caller): in flight.
    pub fn sent(&mut self, now: Instant) {
        if self.sent.is_none() {
            self.ep.cell.started();
            self.sent = Some(now);
        }
    }

    /// Records the outcome, `now` being when it came (the one clock reading for the
    /// latency, the breaker's slow-call check and the facts' window): the endpoint's
    /// breaker, its facts, the selector. Once: the attempt holds nothing after it, only
    /// the endpoint.
    pub fn finish(
        &mut self,
        selector: &SelectorPlugin,
        result: &Result<Reply, CallError>,
        now: Instant,
    ) -> Finding {
        debug_assert!(!self.settled, "an attempt finishes once");
        self.settled = true;
        let ep = self.ep;
        let elapsed = self
            .sent
            .map(|t| now.saturating_duration_since(t))
            .unwrap_or_default();
        ep.breaker
            .record(self.permit, verdict(result, ep.breaker.is_slow(elapsed)));
        let class = classify(result);
        if self.sent.is_some() {
            let latency_ns = elapsed.as_nanos() as u64;
            ep.cell
                .finished_at(axle_core::ns_at(now), latency_ns, class);
            selector.feedback(&Outcome {
                endpoint: ep.id,
                class,
                latency_ns,
            });
        }
        finding(ep, result)
    }
}

impl Drop for Attempt<'_> {
    /// Dropped without an outcome: the permit (a probe's slot, maybe) and the in-flight
    /// count go back, and nothing is learnt about the endpoint.
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.ep.breaker.release(self.permit);
        if self.sent.is_some() {
            self.ep.cell.abandoned();
        }
    }
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
        // Never sent: a draining connection is an endpoint going away gracefully, which
        // says nothing about its health (the rotation handles it, see `health::redial`).
        Err(CallError::Transport(TransportError::Draining { .. })) => OutcomeClass::Rejected,
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

/// What `result` says about `ep` beyond its facts. A refused connect marks it unreachable
/// (news only the first time): the caller then has the rotation recomputed at once
/// rather than at the next health tick.
fn finding(ep: &Endpoint, result: &Result<Reply, CallError>) -> Finding {
    match result {
        Err(CallError::Transport(TransportError::Connect { .. })) => {
            if ep.health.mark_unreachable() {
                Finding::Unreachable
            } else {
                Finding::Nothing
            }
        }
        Err(CallError::Transport(TransportError::Draining { .. }))
        | Err(CallError::Remote {
            class: ErrorClass::ShuttingDown,
            ..
        }) => Finding::GoingAway,
        _ => Finding::Nothing,
    }
}
