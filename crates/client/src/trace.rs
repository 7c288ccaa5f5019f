//! The caller's half of tracing: a call continues the trace its options name (a
//! handler's, through `CallOptions::within`; the gateway's `traceparent`) or starts one,
//! and each attempt is a child span whose id travels to the provider (`docs/wire.md`, tags
//! 7 and 13). The `tracing` spans cost a level check when no subscriber wants them: their
//! fields are only evaluated, formatted and stored when one does.

use axle_core::trace::{TraceContext, SAMPLED};
use tracing::field::{display, Empty};
use tracing::Span;

use crate::state::Endpoint;
use crate::{Call, CallError};

/// A fresh span id: random, never all zeros (W3C calls that invalid).
pub(crate) fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

/// The call's own trace context: a child of `parent`, or the root of a new trace.
pub(crate) fn for_call(parent: Option<TraceContext>) -> TraceContext {
    match parent {
        Some(parent) => parent.child(span_id()),
        None => TraceContext {
            trace_id: fastrand::u128(1..).to_be_bytes(),
            span_id: span_id(),
            flags: SAMPLED,
        },
    }
}

/// The `call` span (info): one per call, all its attempts inside; `parent` is the trace
/// it continues (a handler's, the gateway's `traceparent`), whose span id an exporter
/// needs to hang the call under it.
pub(crate) fn call_span(
    service: &str,
    method: &str,
    trace: &TraceContext,
    parent: Option<&TraceContext>,
) -> Span {
    let span = tracing::info_span!(
        "call",
        service,
        method,
        trace_id = display(trace.trace_hex()),
        span_id = display(trace.span_hex()),
        parent_span_id = Empty,
        error = Empty,
    );
    if let Some(parent) = parent {
        span.record("parent_span_id", display(parent.span_hex()));
    }
    span
}

/// The `attempt` span (info): one per attempt, numbered from 1 within its call.
pub(crate) fn attempt_span(call: &Call<'_>, ep: &Endpoint, number: u32, span: &[u8; 8]) -> Span {
    tracing::info_span!(
        "attempt",
        service = %call.svc.name,
        method = call.method,
        endpoint = %ep.spec.load().address,
        attempt = number,
        trace_id = display(call.trace.trace_hex()),
        span_id = display(axle_core::trace::Hex(span)),
        error = Empty,
    )
}

/// Records the error class on `span` when the call or attempt failed.
pub(crate) fn ended<T>(span: &Span, result: &Result<T, CallError>) {
    if let Err(e) = result {
        span.record("error", e.class());
    }
}
