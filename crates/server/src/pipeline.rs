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

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{ready, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::stages::dedup::{Run, Seen};
use crate::stages::{dispatch, intercept, intercept_chains, limit, protect};
use crate::{Context, Handler, Pipeline};
use axle_core::RequestScope;
use axle_transport::serve::Peer;
use axle_wire::{ErrorClass, Frame, FLAG_EXTERNAL};

/// Runs one request frame through the pipeline; always yields a response frame.
///
/// Every stage before the handler is a plain check ([`start`]); only the handler's run
/// (or a repeat's wait for its first run) is awaited, by [`Waiting`]. A future holds its
/// arguments and every local it keeps across an await, and is moved by copying, nested
/// futures once per level: so the request, its context and the checks' state are not
/// held in it (`docs/performance.md`, "The size of a call's future").
pub async fn run(p: Arc<Pipeline>, request: Frame, peer: Arc<Peer>, arrived: Instant) -> Frame {
    // In a statement of its own: a `match` around the await would keep its scrutinee
    // (another copy of what is awaited) until the match ends.
    let waiting = match start(&p, request, &peer, arrived) {
        Started::Answered(answer) => return answer,
        Started::Waiting(waiting) => waiting,
    };
    waiting.await
}

/// A request answered by the checks, or what it waits on.
enum Started<'p, F> {
    Answered(Frame),
    Waiting(Waiting<'p, F>),
}

pin_project_lite::pin_project! {
    /// A request past every check before its handler: the future of its answer. Written
    /// by hand, not as an `async` block, so that the handler's run is held once, in
    /// place: an `async` block awaiting it kept a second copy (what it awaits, beside
    /// the struct the run came in), and the request's future, boxed for every request,
    /// was 1,392 bytes so, past the allocator's per-thread cache (1,032 bytes).
    struct Waiting<'p, F> {
        guard: &'p protect::MethodGuard,
        #[pin]
        work: Work<'p, F>,
        after: After,
        // Counted in flight until its answer is made (taken then).
        in_flight: Option<InFlight<'p>>,
    }
}

pin_project_lite::pin_project! {
    /// What a request past the checks waits on.
    #[project = WorkProj]
    enum Work<'p, F> {
        // Its handler's run, under the limiter's permit and the guard's entry; a new
        // request of a deduplicated method says how it ended through `first_run`. Each
        // is taken when the run ends.
        Handler {
            #[pin]
            answer: F,
            permit: Option<limit::Permit>,
            entry: Option<axle_governance::guard::Entry<'p>>,
            first_run: Option<Run<'p>>,
        },
        // A repeat of a deduplicated method: the first run's answer. Boxed: it may wait
        // on the first run, and unboxed that wait would sit in every request's future.
        Repeat {
            answer: BoxFuture<'static, Frame>,
        },
    }
}

impl<F: Future<Output = (Frame, bool)>> Future for Waiting<'_, F> {
    type Output = Frame;

    // Inlined where it is called, so the frames and context it takes and gives are not
    // copied whole at the call (docs/performance.md, "The server's checks inlined").
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Frame> {
        let this = self.project();
        let guard = *this.guard;
        let answer = match this.work.project() {
            WorkProj::Repeat { answer } => ready!(answer.as_mut().poll(cx)),
            WorkProj::Handler {
                answer,
                permit,
                entry,
                first_run,
            } => {
                let (response, ran) = ready!(answer.poll(cx));
                if response.meta.error_class == Some(ErrorClass::Internal) {
                    guard.guard.unexpected_error();
                }
                if let Some(permit) = permit.take() {
                    permit.ended(&response);
                }
                drop(entry.take());
                if let Some(run) = first_run.take() {
                    run.finish(&response, ran);
                }
                response
            }
        };
        let answer = this.after.apply(guard, answer);
        guard.stats.answered(answer.meta.error_class);
        drop(this.in_flight.take());
        Poll::Ready(answer)
    }
}

/// The server-after interceptors still to see the answer (the service's chain, and
/// what the server-before ones saw); none configured: nothing.
struct After(Option<(Arc<intercept_chains::Chains>, Box<intercept::Parts>)>);

impl After {
    // Inlined where it is called, so the frames and context it takes and gives are not
    // copied whole at the call (docs/performance.md, "The server's checks inlined").
    #[inline(always)]
    fn apply(&self, guard: &protect::MethodGuard, answer: Frame) -> Frame {
        match &self.0 {
            Some((chains, parts)) => intercept::after(chains.of(&guard.service), parts, answer),
            None => answer,
        }
    }
}

/// Closing, parse, method entry, not served, then [`protected`]: every check before the
/// handler, its answer when one refuses.
// Inlined where it is called, so the frames and context it takes and gives are not
// copied whole at the call (docs/performance.md, "The server's checks inlined").
#[inline(always)]
fn start<'p>(
    p: &'p Pipeline,
    mut request: Frame,
    peer: &Arc<Peer>,
    arrived: Instant,
) -> Started<'p, impl Future<Output = (Frame, bool)> + Send + 'p> {
    let id = request.id;
    if p.closing.load(Relaxed) {
        p.refused_closing.fetch_add(1, Relaxed);
        p.last_refused_ns.store(axle_core::now_ns(), Relaxed);
        return Started::Answered(Frame::error(
            id,
            ErrorClass::ShuttingDown,
            "the provider is shutting down",
        ));
    }
    let (Some(service), Some(method)) = (request.meta.service.take(), request.meta.method.take())
    else {
        p.malformed.fetch_add(1, Relaxed);
        return Started::Answered(Frame::error(
            id,
            ErrorClass::BadRequest,
            "a request needs a service and a method",
        ));
    };
    p.in_flight.fetch_add(1, Relaxed);
    let in_flight = InFlight(p);
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
            // From when the frame was read: the time it waited since counts against it.
            deadline: Some(arrived + budget),
            tags: std::mem::take(&mut request.meta.tags),
            consumer_app: request.meta.consumer_app.take(),
            external,
            trace: Some(crate::trace::for_request(&request.meta)),
        },
    };
    let protected = match handler {
        Some(handler) => protected(p, guard, handler, ctx, request, external, arrived),
        None => Err(Box::new(dispatch::not_found(&ctx, id))),
    };
    match protected {
        Ok((work, after)) => Started::Waiting(Waiting {
            guard,
            work,
            after,
            in_flight: Some(in_flight),
        }),
        Err(answer) => {
            guard.stats.answered(answer.meta.error_class);
            Started::Answered(*answer)
        }
    }
}

/// Internal-only, then the server-before interceptors, then (for a deduplicated method) a
/// repeat answered from memory, then limiter, concurrency guard and fuse: what the
/// request waits on (its handler's run, started here), or the answer of the check that
/// refused it, shown to the server-after interceptors.
#[allow(clippy::type_complexity)]
// Inlined where it is called, so the frames and context it takes and gives are not
// copied whole at the call (docs/performance.md, "The server's checks inlined").
#[inline(always)]
fn protected<'p>(
    p: &'p Pipeline,
    guard: &'p protect::MethodGuard,
    handler: &Handler,
    mut ctx: Context,
    request: Frame,
    external: bool,
    arrived: Instant,
) -> Result<
    (
        Work<'p, impl Future<Output = (Frame, bool)> + Send + 'p>,
        After,
    ),
    Box<Frame>,
> {
    let id = request.id;
    protect::check_internal(guard, external, &ctx, id)?;
    let chains = intercept_chains::now(p);
    let chain = chains.as_deref().map_or(&[][..], |c| c.of(&guard.service));
    let parts = if chain.is_empty() {
        None
    } else {
        intercept::before(chain, &mut ctx, &request.payload, id)?
    };
    let after = After(match (chains, parts) {
        (Some(chains), Some(parts)) => Some((chains, Box::new(parts))),
        _ => None,
    });
    // A repeat of a deduplicated method is answered from memory; a new one runs, and its
    // answer is remembered.
    let mut first_run = None;
    if let (Some(dedup), Some(request_id)) = (&guard.dedup, request.meta.request_id) {
        match dedup.begin(request_id) {
            Seen::New(run) => first_run = Some(run),
            Seen::Repeat(repeat) => {
                dedup.repeated();
                let answer = Box::pin(repeat.answer(id, ctx.scope.deadline));
                return Ok((Work::Repeat { answer }, after));
            }
            Seen::Full => {
                let full = Frame::error(
                    id,
                    ErrorClass::Overloaded,
                    format!(
                        "{}/{}: the deduplication table is full of running requests",
                        ctx.service, ctx.method
                    ),
                );
                return Err(Box::new(after.apply(guard, full)));
            }
        }
    }
    match admit(p, guard, &ctx, id, arrived) {
        Err(refused) => {
            if let Some(run) = first_run {
                run.finish(&refused, false);
            }
            Err(Box::new(after.apply(guard, *refused)))
        }
        Ok((permit, entry)) => {
            let answer = dispatch::dispatch(handler, ctx, request, &guard.stats);
            let work = Work::Handler {
                answer,
                permit,
                entry: Some(entry),
                first_run,
            };
            Ok((work, after))
        }
    }
}

/// Limiter, then concurrency guard and fuse: what the handler runs under, or the
/// refusal (a refusal before the handler started may be retried anywhere).
fn admit<'g>(
    p: &Pipeline,
    guard: &'g protect::MethodGuard,
    ctx: &Context,
    id: u64,
    arrived: Instant,
) -> Result<(Option<limit::Permit>, axle_governance::guard::Entry<'g>), Box<Frame>> {
    let permit = limit::admit(p, ctx, guard, id, arrived)?;
    match guard.guard.enter() {
        Ok(entry) => Ok((permit, entry)),
        Err(refusal) => {
            let answer = protect::refusal(refusal, ctx, id);
            if let Some(permit) = permit {
                permit.ended(&answer);
            }
            Err(Box::new(answer))
        }
    }
}

struct InFlight<'a>(&'a Pipeline);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use axle_wire::{ErrorClass, Frame, Metadata};
    use bytes::Bytes;

    use crate::{Response, ServerBuilder};

    /// A server whose `echo` service answers every method with the request's payload,
    /// counting the handler's runs.
    async fn echo_server() -> (crate::Server, Arc<AtomicU32>) {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let echo: crate::Handler = Arc::new(move |req| {
            counted.fetch_add(1, Relaxed);
            Box::pin(async move {
                Ok(Response {
                    payload: req.payload,
                    content_type: req.content_type,
                })
            })
        });
        let server = ServerBuilder::new()
            .any_method("echo", echo)
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        (server, runs)
    }

    fn request(id: u64, deadline_us: Option<u64>) -> Frame {
        let meta = Metadata {
            service: Some("echo".into()),
            method: Some("x".into()),
            deadline_us,
            ..Metadata::default()
        };
        Frame::request(id, meta, Bytes::from_static(b"hi"))
    }

    fn peer() -> Arc<axle_transport::serve::Peer> {
        axle_transport::serve::Peer::plain("127.0.0.1:5555".parse().unwrap())
    }

    /// A request's future is copied into its box on every request, so its size is paid
    /// per request: 5,232 bytes with a future per stage, 3,832 with the stages as plain
    /// checks in one `async fn`, 1,392 with only the handler's run awaited, 904 with that
    /// run held once, 744 with the handler's timing written by hand too. The bound is
    /// glibc's per-thread cache: a box of up to 1,032 bytes comes from it, a larger one
    /// from the arena's bins: about 45 ns a request more, taking and freeing it
    /// (`docs/performance.md`, "The size of a call's future" and "Boxes past the
    /// allocator's cache").
    #[tokio::test]
    async fn a_requests_future_stays_small() {
        let (server, _) = echo_server().await;
        let run = super::run(
            server.pipeline.clone(),
            request(1, None),
            peer(),
            Instant::now(),
        );
        let size = std::mem::size_of_val(&run);
        assert!(size <= 1032, "a request's future is {size} bytes");
        assert_eq!(run.await.meta.error_class, None, "and it answers");
        server.shutdown(Duration::ZERO).await;
    }

    /// The budget a request brings counts from when its frame was read, not from when
    /// the pipeline got to it: one that waited out its budget before dispatch is late.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_deadline_counts_from_the_frames_arrival() {
        let (server, runs) = echo_server().await;
        let p = server.pipeline.clone();
        // Ten seconds from a frame read now: served however slow the machine is.
        let fresh = request(1, Some(10_000_000));
        let fresh = super::run(p.clone(), fresh, peer(), Instant::now()).await;
        assert_eq!(fresh.meta.error_class, None);
        // 50 ms from a frame read 60 ms ago: late before the pipeline starts.
        let read_long_ago = Instant::now() - Duration::from_millis(60);
        let late = super::run(p, request(2, Some(50_000)), peer(), read_long_ago).await;
        assert_eq!(late.meta.error_class, Some(ErrorClass::DeadlineExceeded));
        assert_eq!(
            runs.load(Relaxed),
            1,
            "the late request's handler never ran"
        );
        server.shutdown(Duration::ZERO).await;
    }
}
