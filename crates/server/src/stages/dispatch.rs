//! Runs the handler found for the request, unless its deadline has already passed, within
//! the remaining budget, timing it for the method's counters. A request no handler serves
//! is answered `not_found` earlier, before any protection (`not_found`).

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Poll};
use std::time::Instant;

use tracing::Instrument;

use crate::stats::MethodStats;
use crate::{Context, Handler, HandlerFuture, Request};
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
// Inlined where it is called, so the frames and context it takes and gives are not
// copied whole at the call (docs/performance.md, "The server's checks inlined").
#[inline(always)]
pub fn dispatch<'s>(
    handler: &Handler,
    ctx: Context,
    request: Frame,
    stats: &'s MethodStats,
) -> Handling<'s> {
    let id = request.id;
    // One clock reading: whether the deadline has passed, and when the handler started.
    let started = Instant::now();
    let within = if ctx.scope.expired_at(started) {
        None
    } else {
        let deadline = ctx.scope.deadline;
        let span = crate::trace::handler_span(&ctx, request.meta.span_id.as_ref());
        let req = Request {
            ctx,
            content_type: request.meta.content_type.unwrap_or_default(),
            payload: request.payload,
        };
        Some(Within {
            run: handler(req).instrument(span),
            deadline,
            timer: None,
        })
    };
    Handling {
        id,
        started,
        stats,
        within,
    }
}

/// A handler's answer future, in the handler's span.
type Run = tracing::instrument::Instrumented<HandlerFuture>;

pin_project_lite::pin_project! {
    /// A handler's run to its answer frame, timed for the method's counters; `None` for
    /// a request whose deadline passed before it started. Written by hand, not as an
    /// `async` block: one would hold the run twice (as captured, and as what it awaits),
    /// 376 bytes where this is 216, in every request's future.
    pub struct Handling<'s> {
        id: u64,
        started: Instant,
        stats: &'s MethodStats,
        #[pin]
        within: Option<Within<Run>>,
    }
}

impl Future for Handling<'_> {
    type Output = (Frame, bool);

    // Inlined where it is called, so the frames and context it takes and gives are not
    // copied whole at the call (docs/performance.md, "The server's checks inlined").
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<(Frame, bool)> {
        let this = self.project();
        let id = *this.id;
        let Some(mut within) = this.within.as_pin_mut() else {
            let late = Frame::error(
                id,
                ErrorClass::DeadlineExceeded,
                "the deadline passed before the handler started",
            );
            return Poll::Ready((late, false));
        };
        let result = ready!(within.as_mut().poll(cx));
        this.stats.handled(this.started.elapsed().as_nanos() as u64);
        let span = within.as_ref().get_ref().run.span();
        let answer = match result {
            None => {
                span.record("error", ErrorClass::DeadlineExceeded.as_str());
                Frame::error(
                    id,
                    ErrorClass::DeadlineExceeded,
                    "the handler ran out of time",
                )
            }
            Some(Ok(resp)) => Frame::response(id, Some(resp.content_type), resp.payload),
            Some(Err(status)) => {
                span.record("error", status.class.as_str());
                let mut frame = Frame::error(id, status.class, status.message);
                frame.meta.error_code = status.code;
                frame
            }
        };
        Poll::Ready((answer, true))
    }
}

pin_project_lite::pin_project! {
    /// A handler's run within its deadline (`None` once the deadline passed first), its
    /// timer made only when the first poll did not finish it: most handlers answer at
    /// once, and making a timer clones the runtime's handle, a count every request on
    /// every core would write (`docs/performance.md`, "Shared counts"). As with
    /// `tokio::time::timeout_at`, the run is polled before the timer.
    struct Within<F> {
        #[pin]
        run: F,
        deadline: Option<Instant>,
        #[pin]
        timer: Option<tokio::time::Sleep>,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(answer) = this.run.poll(cx) {
            return Poll::Ready(Some(answer));
        }
        let Some(deadline) = *this.deadline else {
            return Poll::Pending;
        };
        if this.timer.is_none() {
            this.timer
                .set(Some(tokio::time::sleep_until(deadline.into())));
        }
        this.timer
            .as_pin_mut()
            .map_or(Poll::Pending, |timer| timer.poll(cx).map(|()| None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::{Response, Status};
    use axle_core::RequestScope;
    use axle_wire::Metadata;
    use bytes::Bytes;

    fn context(deadline: Option<Instant>) -> Context {
        Context {
            service: "svc".into(),
            method: "m".into(),
            peer: "127.0.0.1:5555".parse().unwrap(),
            peer_identity: None,
            scope: RequestScope {
                deadline,
                ..RequestScope::default()
            },
        }
    }

    fn request() -> Frame {
        Frame::request(7, Metadata::default(), Bytes::from_static(b"hi"))
    }

    /// The answer frame, whether the handler started, and how many runs the method's
    /// counters saw handled.
    async fn handle(handler: Handler, deadline: Option<Instant>) -> (Frame, bool, u64) {
        let stats = MethodStats::new(true);
        let (answer, ran) = dispatch(&handler, context(deadline), request(), &stats).await;
        (answer, ran, stats.view("svc", "m", 0, 0).handled)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_is_answered_by_its_result_and_counted() {
        let echo: Handler = Arc::new(|req| {
            Box::pin(async move {
                Ok(Response {
                    payload: req.payload,
                    content_type: req.content_type,
                })
            })
        });
        let (answer, ran, handled) = handle(echo, None).await;
        assert_eq!((answer.id, answer.meta.error_class), (7, None));
        assert_eq!(&answer.payload[..], b"hi");
        assert_eq!((ran, handled), (true, 1));

        let refuses: Handler =
            Arc::new(|_| Box::pin(async { Err(Status::business_code("conflict", "taken")) }));
        let (answer, ran, handled) = handle(refuses, None).await;
        assert_eq!(answer.meta.error_class, Some(ErrorClass::Business));
        assert_eq!(answer.meta.error_code.as_deref(), Some("conflict"));
        assert_eq!(answer.meta.error_message.as_deref(), Some("taken"));
        assert_eq!((ran, handled), (true, 1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_past_its_deadline_is_answered_late_and_one_never_started_is_not_run() {
        let waits: Handler = Arc::new(|_| Box::pin(std::future::pending()));
        let soon = Instant::now() + Duration::from_millis(20);
        let (answer, ran, handled) = handle(waits.clone(), Some(soon)).await;
        assert_eq!(answer.meta.error_class, Some(ErrorClass::DeadlineExceeded));
        assert_eq!(
            answer.meta.error_message.as_deref(),
            Some("the handler ran out of time")
        );
        assert_eq!((ran, handled), (true, 1), "it ran, and is counted");

        let gone = Instant::now() - Duration::from_millis(1);
        let (answer, ran, handled) = handle(waits, Some(gone)).await;
        assert_eq!(answer.meta.error_class, Some(ErrorClass::DeadlineExceeded));
        assert_eq!(
            answer.meta.error_message.as_deref(),
            Some("the deadline passed before the handler started")
        );
        assert_eq!((ran, handled), (false, 0), "never started, not counted");
    }

    fn within<F: Future>(run: F, deadline: Option<Instant>) -> Within<F> {
        Within {
            run,
            deadline,
            timer: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_that_answers_at_once_wins_even_past_its_deadline_and_makes_no_timer() {
        let gone = Instant::now() - Duration::from_millis(1);
        let mut at_once = std::pin::pin!(within(async { 7 }, Some(gone)));
        assert_eq!(futures::poll!(at_once.as_mut()), Poll::Ready(Some(7)));
        assert!(at_once.timer.is_none(), "no timer for a run that answered");
        assert_eq!(within(async { 8 }, None).await, Some(8));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_that_waits_gets_its_timer() {
        let never = std::future::pending::<u32>();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(
            within(never, Some(soon)).await,
            None,
            "the deadline ends it"
        );

        let (tx, rx) = tokio::sync::oneshot::channel();
        let later = Instant::now() + Duration::from_secs(30);
        let mut waiting = std::pin::pin!(within(async { rx.await.unwrap() }, Some(later)));
        assert_eq!(futures::poll!(waiting.as_mut()), Poll::Pending);
        assert!(waiting.timer.is_some(), "a run still waiting has its timer");
        tx.send(9).unwrap();
        assert_eq!(waiting.await, Some(9), "answered before the deadline");
    }
}
