//! Runs the handler found for the request, unless its deadline has already passed, within
//! the remaining budget, timing it for the method's counters. A request no handler serves
//! is answered `not_found` earlier, before any protection (`not_found`).

use std::future::Future;
use std::time::Instant;

use tracing::Instrument;

use crate::stats::MethodStats;
use crate::{Context, Handler, Request};
use axle_wire::{ErrorClass, Frame};

/// The answer to a request no handler serves (the pipeline gives it right after the
/// request is counted: the trust check, the limiter and the guards never see it).
pub fn not_found(ctx: &Context, id: u64) -> Frame {
    Frame::error(
        id,
        ErrorClass::NotFound,
        format!("no method {}/{} here", ctx.service, ctx.method),
    )
}

/// The answer, and whether the handler started.
///
/// The checks and the handler's own future are made here, before the returned future
/// is first polled; that future holds only what the wait needs (the handler's future,
/// its span, when it started), not the request and context it was built from. The
/// pipeline's futures nest, and each is moved by copying, so every byte held here is
/// copied again by each level above (`docs/performance.md`, "The size of a call's
/// future").
pub fn dispatch<'s>(
    handler: &Handler,
    ctx: Context,
    request: Frame,
    stats: &'s MethodStats,
) -> impl Future<Output = (Frame, bool)> + Send + 's {
    let id = request.id;
    // One clock reading: whether the deadline has passed, and when the handler started.
    let started = Instant::now();
    let running = if ctx.scope.expired_at(started) {
        None
    } else {
        let deadline = ctx.scope.deadline;
        let span = crate::trace::handler_span(&ctx, request.meta.span_id.as_ref());
        let req = Request {
            ctx,
            content_type: request.meta.content_type.unwrap_or_default(),
            payload: request.payload,
        };
        let run = handler(req).instrument(span.clone());
        Some((run, deadline, span))
    };
    async move {
        let Some((run, deadline, span)) = running else {
            let late = Frame::error(
                id,
                ErrorClass::DeadlineExceeded,
                "the deadline passed before the handler started",
            );
            return (late, false);
        };
        let result = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), run).await {
                Ok(r) => r,
                Err(_) => {
                    stats.handled(started.elapsed().as_nanos() as u64);
                    let late = Frame::error(
                        id,
                        ErrorClass::DeadlineExceeded,
                        "the handler ran out of time",
                    );
                    span.record("error", ErrorClass::DeadlineExceeded.as_str());
                    return (late, true);
                }
            },
            None => run.await,
        };
        stats.handled(started.elapsed().as_nanos() as u64);
        let answer = match result {
            Ok(resp) => Frame::response(id, Some(resp.content_type), resp.payload),
            Err(status) => {
                span.record("error", status.class.as_str());
                let mut frame = Frame::error(id, status.class, status.message);
                frame.meta.error_code = status.code;
                frame
            }
        };
        (answer, true)
    }
}
