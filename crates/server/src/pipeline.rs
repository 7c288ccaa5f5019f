//! The provider's request path, stage by stage in the order a request meets them. This
//! file is the one list; each stage is a function in `stages/` that either lets the
//! request go on or answers it with a frame, so a refusal never reaches later stages:
//!
//! ```text
//! closing          here                a stopping server answers `shutting_down`
//! parse            here                service and method, or `bad_request`
//! method entry     protect.rs          the method's counters and guard: a declared
//!                                      method's own; other names a catch-all serves
//!                                      share `S/*`, names no handler serves `*/*`
//! not served       dispatch.rs         a method no handler serves: `not_found`, before
//!                                      any protection runs (nothing below counts it)
//! trust            protect.rs          internal-only methods refuse external requests (a
//!                                      peer `[trust]` does not name is always external)
//! intercept        intercept.rs        server-before: the service's `server-interceptors`
//!                                      pass, set the tags the handler sees, or refuse
//!                                      (an error frame of the refusal's class); none
//!                                      configured: one emptiness check
//! limiter          limit.rs            the limiter plugin admits or rejects
//! guard and fuse   governance          max-concurrent, error fuse
//! deadline         here, dispatch.rs   the budget, capped by the method's `max-deadline-ms`
//!                                      (`default-deadline-ms` when it brings none); one
//!                                      already gone does not start
//! handler          dispatch.rs         the handler, with what is left of the budget, in
//!                                      its own span of the caller's trace (trace.rs)
//! intercept        intercept.rs        server-after: the answer shown to the chain (the
//!                                      handler's or a stage's); a refusal replaces it
//! ```
//!
//! Every method's requests and answers are counted on the way (`stats.rs`). A method is
//! declared when the manifest names it or a handler is registered for it exactly; the
//! entries are made at bind, so no name a caller sends grows them or dilutes a declared
//! method's policy. The composition is static: strategies are plugins called from
//! stages, not middleware.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stages::dedup::Seen;
use crate::stages::{dispatch, intercept, intercept_chains, limit, protect};
use crate::{Context, Handler, Pipeline};
use axle_core::RequestScope;
use axle_transport::serve::Peer;
use axle_wire::{ErrorClass, Frame, FLAG_EXTERNAL};

/// Runs one request frame through the pipeline; always yields a response frame.
pub async fn run(p: &Pipeline, mut request: Frame, peer: &Arc<Peer>) -> Frame {
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
    // The trust boundary: a peer the manifest does not trust is external whatever its
    // frame says; a trusted one (an internal service, the edge) passes on the marker
    // the request came with.
    let external = !p.trust.trusts(peer) || request.flags & FLAG_EXTERNAL != 0;
    let handler = p.handler(&service, &method);
    let guard = p.guards.of(&service, &method, handler.is_some());
    guard.stats.received();
    // The provider bounds every request's budget: one brought longer than the method's
    // `max-deadline-ms` is cut to it, and one brought none gets `default-deadline-ms`.
    let budget = match request.meta.deadline_us {
        Some(us) => Duration::from_micros(us).min(guard.max_deadline),
        None => guard.default_deadline,
    };
    let ctx = Context {
        service,
        method,
        peer: peer.addr,
        peer_identity: peer.identity().map(str::to_string),
        scope: RequestScope {
            deadline: Some(Instant::now() + budget),
            tags: std::mem::take(&mut request.meta.tags),
            consumer_app: request.meta.consumer_app.take(),
            external,
            trace: Some(crate::trace::for_request(&request.meta)),
        },
    };
    let response = match handler {
        Some(handler) => protected(p, guard, handler, ctx, request, external).await,
        None => dispatch::not_found(&ctx, id),
    };
    guard.stats.answered(response.meta.error_class);
    response
}

/// Internal-only, then the server-before interceptors, then (for a deduplicated method) a
/// repeat answered from memory, then limiter, concurrency guard and fuse, then the
/// handler, and the server-after interceptors on its answer.
async fn protected(
    p: &Pipeline,
    guard: &protect::MethodGuard,
    handler: Handler,
    ctx: Context,
    request: Frame,
    external: bool,
) -> Frame {
    let id = request.id;
    if let Err(frame) = protect::check_internal(guard, external, &ctx, id) {
        return *frame;
    }
    let chains = intercept_chains::now(p);
    let chain = chains.as_deref().map_or(&[][..], |c| c.of(&guard.service));
    if chain.is_empty() {
        return deduplicated(p, guard, handler, ctx, request).await;
    }
    let mut ctx = ctx;
    match intercept::before(chain, &mut ctx, &request.payload, id) {
        Err(refused) => *refused,
        Ok(None) => deduplicated(p, guard, handler, ctx, request).await,
        Ok(Some(parts)) => {
            let answer = deduplicated(p, guard, handler, ctx, request).await;
            intercept::after(chain, &parts, answer)
        }
    }
}

/// A repeat of a deduplicated method answered from memory, else admitted and run.
async fn deduplicated(
    p: &Pipeline,
    guard: &protect::MethodGuard,
    handler: Handler,
    ctx: Context,
    request: Frame,
) -> Frame {
    let id = request.id;
    let (Some(dedup), Some(request_id)) = (&guard.dedup, request.meta.request_id) else {
        return admitted(p, guard, handler, ctx, request).await.0;
    };
    match dedup.begin(request_id) {
        Seen::New(run) => {
            let (answer, ran) = admitted(p, guard, handler, ctx, request).await;
            run.finish(&answer, ran);
            answer
        }
        Seen::Repeat(repeat) => {
            dedup.repeated();
            repeat.answer(id, ctx.scope.deadline).await
        }
        Seen::Full => Frame::error(
            id,
            ErrorClass::Overloaded,
            format!(
                "{}/{}: the deduplication table is full of running requests",
                ctx.service, ctx.method
            ),
        ),
    }
}

/// Limiter, concurrency guard and fuse, then the handler: the answer, and whether the
/// handler started (a refusal before it did may be retried anywhere).
async fn admitted(
    p: &Pipeline,
    guard: &protect::MethodGuard,
    handler: Handler,
    ctx: Context,
    request: Frame,
) -> (Frame, bool) {
    let id = request.id;
    let permit = match limit::admit(p, &ctx, guard, id) {
        Ok(permit) => permit,
        Err(frame) => return (*frame, false),
    };
    let _entry = match guard.guard.enter() {
        Ok(entry) => entry,
        Err(refusal) => {
            let answer = protect::refusal(refusal, &ctx, id);
            if let Some(permit) = permit {
                permit.ended(&answer);
            }
            return (answer, false);
        }
    };
    let (response, ran) = dispatch::dispatch(handler, ctx, request, &guard.stats).await;
    if response.meta.error_class == Some(ErrorClass::Internal) {
        guard.guard.unexpected_error();
    }
    if let Some(permit) = permit {
        permit.ended(&response);
    }
    (response, ran)
}

struct InFlight<'a>(&'a Pipeline);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}
