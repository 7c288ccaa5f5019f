//! The provider's half of tracing: a request continues the trace its frame carries (tags
//! 7 and 13, `docs/wire.md`) in a span of its own, the handler's, which the calls the
//! handler makes (`CallOptions::within(&ctx)`) have as parent. A request from a peer that
//! sends no trace starts one here, so every handler has a context to hand on. The
//! `handler` span costs a level check when no subscriber wants it.

use axle_core::trace::{Hex, TraceContext, SAMPLED};
use axle_wire::Metadata;
use tracing::field::{display, Empty};
use tracing::Span;

use crate::Context;

/// A fresh span id: random, never all zeros.
fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

/// The handler's trace context: the caller's trace in a new span (a new trace when the
/// frame carries none, or an all-zero id W3C calls invalid).
pub(crate) fn for_request(meta: &Metadata) -> TraceContext {
    match meta.trace_id.filter(|id| *id != [0; 16]) {
        Some(trace_id) => TraceContext {
            trace_id,
            span_id: span_id(),
            flags: if meta.span_id.is_some() {
                meta.trace_flags
            } else {
                SAMPLED
            },
        },
        None => TraceContext {
            trace_id: fastrand::u128(1..).to_be_bytes(),
            span_id: span_id(),
            flags: SAMPLED,
        },
    }
}

/// The `handler` span (info), with the caller's attempt span as `parent_span_id`.
pub(crate) fn handler_span(ctx: &Context, parent: Option<&[u8; 8]>) -> Span {
    let Some(trace) = &ctx.scope.trace else {
        return Span::none();
    };
    let span = tracing::info_span!(
        "handler",
        service = %ctx.service,
        method = %ctx.method,
        trace_id = display(trace.trace_hex()),
        span_id = display(trace.span_hex()),
        parent_span_id = Empty,
        error = Empty,
    );
    if let Some(parent) = parent {
        span.record("parent_span_id", display(Hex(parent)));
    }
    span
}
