//! Runs the handler found for the request, unless its deadline has already passed, within
//! the remaining budget, timing it for the method's counters. A request no handler serves
//! is answered `not_found` earlier, before any protection (`not_found`).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
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
        let within = Within {
            run,
            deadline,
            timer: None,
        };
        let Some(result) = within.await else {
            stats.handled(started.elapsed().as_nanos() as u64);
            let late = Frame::error(
                id,
                ErrorClass::DeadlineExceeded,
                "the handler ran out of time",
            );
            span.record("error", ErrorClass::DeadlineExceeded.as_str());
            return (late, true);
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
    use std::time::Duration;

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
