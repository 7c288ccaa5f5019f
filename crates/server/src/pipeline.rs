//! The provider's request path, stage by stage in the order a request meets them. This
//! file is the one list; each stage is a function in `stages/` that either lets the
//! request go on or answers it with a frame, so a refusal never reaches later stages:
//!
//! ```text
//! closing          here                a stopping server answers `shutting_down`
//! parse            here                service and method, or `bad_request`
//! method entry     protect.rs          the method's counters and guard; names no handler
//!                                      serves share one bounded `*` entry
//! trust            protect.rs          internal-only methods refuse external requests
//! limiter          limit.rs            the limiter plugin admits or rejects
//! guard and fuse   governance          max-concurrent, error fuse
//! deadline         dispatch.rs         a request whose budget is gone does not start
//! handler          dispatch.rs         the handler, with what is left of the budget (a
//!                                      method no handler serves: `not_found`)
//! ```
//!
//! Every method's requests and answers are counted on the way (`stats.rs`). The
//! composition is static: strategies are plugins called from stages, not middleware.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::stages::{dispatch, limit, protect};
use crate::{Context, Handler, Pipeline};
use axle_core::RequestScope;
use axle_wire::{ErrorClass, Frame, FLAG_EXTERNAL};

/// Runs one request frame through the pipeline; always yields a response frame.
pub async fn run(p: &Pipeline, mut request: Frame, peer: SocketAddr) -> Frame {
    let id = request.id;
    if p.closing.load(Relaxed) {
        p.refused_closing.fetch_add(1, Relaxed);
        p.last_refused_ns.store(axle_core::now_ns(), Relaxed);
        return Frame::error(
            id,
            ErrorClass::ShuttingDown,
            "the provider is shutting down",
        );
    }
    let (Some(service), Some(method)) = (request.meta.service.take(), request.meta.method.take())
    else {
        p.malformed.fetch_add(1, Relaxed);
        return Frame::error(
            id,
            ErrorClass::BadRequest,
            "a request needs a service and a method",
        );
    };
    p.in_flight.fetch_add(1, Relaxed);
    let _done = InFlight(p);
    let external = request.flags & FLAG_EXTERNAL != 0;
    let ctx = Context {
        service,
        method,
        peer,
        scope: RequestScope {
            deadline: request
                .meta
                .deadline_us
                .map(|us| Instant::now() + Duration::from_micros(us)),
            tags: std::mem::take(&mut request.meta.tags),
            consumer_app: request.meta.consumer_app.take(),
            external,
        },
    };
    let handler = p.handler(&ctx.service, &ctx.method);
    let guard = p.guards.of(&ctx.service, &ctx.method, handler.is_some());
    guard.stats.received();
    let response = protected(p, &guard, handler, ctx, request, external).await;
    guard.stats.answered(response.meta.error_class);
    response
}

/// Internal-only, limiter, concurrency guard and fuse, then the handler.
async fn protected(
    p: &Pipeline,
    guard: &protect::MethodGuard,
    handler: Option<Handler>,
    ctx: Context,
    request: Frame,
    external: bool,
) -> Frame {
    let id = request.id;
    if let Err(frame) = protect::check_internal(guard, external, &ctx, id) {
        return *frame;
    }
    if let Err(frame) = limit::admit(p, &ctx, guard, id) {
        return *frame;
    }
    let _entry = match guard.guard.enter() {
        Ok(entry) => entry,
        Err(refusal) => return protect::refusal(refusal, &ctx, id),
    };
    let response = dispatch::dispatch(handler, ctx, request, &guard.stats).await;
    if response.meta.error_class == Some(ErrorClass::Internal) {
        guard.guard.unexpected_error();
    }
    response
}

struct InFlight<'a>(&'a Pipeline);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}
