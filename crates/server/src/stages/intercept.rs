//! INTERCEPT, on the provider: the service's `server-interceptors`, in manifest order.
//! `server-before` runs once the trust boundary has decided (a request it refused never
//! reaches a plugin) and before deduplication, the limiter and the handler: an
//! interceptor may pass, set the tags the handler sees in its [`Context`] (the next
//! interceptor sees them too), or refuse — the request is answered with an error frame of
//! the refusal's class and runs nowhere. `server-after` sees the answer (the handler's, or
//! a stage's refusal) and may replace it with an error frame. A refusal ends the chain.
//!
//! The peer an interceptor sees is the caller's IP. A server without interceptors pays
//! one relaxed load per request (`intercept_chains.rs` keeps the chains).

use std::sync::Arc;

use axle_plugin_host::kinds::interceptor::{
    CallView, InterceptPoint, InterceptVerdict, InterceptorPlugin, Refusal,
};
use axle_wire::{ErrorClass, Frame};

use crate::Context;

fn view<'a>(
    point: InterceptPoint,
    ctx: &'a Parts,
    traceparent: &'a str,
    payload: &'a [u8],
    outcome: &'a str,
) -> CallView<'a> {
    CallView {
        tags: &ctx.tags,
        consumer_app: ctx.consumer_app.as_deref().unwrap_or(""),
        peer: Some(ctx.peer),
        traceparent,
        deadline_left_us: ctx
            .deadline
            .map(|d| d.saturating_duration_since(std::time::Instant::now()))
            .map(|left| left.as_micros().min(u128::from(u64::MAX)) as u64)
            .unwrap_or(0),
        payload,
        outcome,
        ..CallView::new(point, &ctx.service, &ctx.method)
    }
}

/// What an after point needs of the request once the handler has taken it.
pub struct Parts {
    service: axle_wire::ByteString,
    method: axle_wire::ByteString,
    tags: Vec<(String, String)>,
    consumer_app: Option<String>,
    peer: std::net::IpAddr,
    deadline: Option<std::time::Instant>,
    traceparent: String,
    payload: bytes::Bytes,
}

impl Parts {
    fn of(ctx: &Context, payload: &bytes::Bytes, chain: &[Arc<InterceptorPlugin>]) -> Parts {
        let reads_trace = chain.iter().any(|i| i.declaration().reads.trace);
        Parts {
            service: ctx.service.clone(),
            method: ctx.method.clone(),
            tags: ctx.scope.tags.clone(),
            consumer_app: ctx.scope.consumer_app.clone(),
            peer: ctx.peer.ip(),
            deadline: ctx.scope.deadline,
            traceparent: match (reads_trace, ctx.traceparent()) {
                (true, Some(t)) => t,
                _ => String::new(),
            },
            payload: payload.clone(),
        }
    }
}

/// `server-before`: the context's tags changed as the chain says, or the error frame of
/// a refusal. `Ok(Some(parts))`: what `server-after` will need (`None` when no
/// interceptor of the chain runs there).
pub fn before(
    chain: &[Arc<InterceptorPlugin>],
    ctx: &mut Context,
    payload: &bytes::Bytes,
    id: u64,
) -> Result<Option<Parts>, Box<Frame>> {
    let point = InterceptPoint::ServerBefore;
    let mut parts = Parts::of(ctx, payload, chain);
    for interceptor in chain.iter().filter(|i| i.runs_at(point)) {
        let call = view(point, &parts, &parts.traceparent, &parts.payload, "");
        match interceptor.intercept(&call).verdict {
            InterceptVerdict::Pass => {}
            InterceptVerdict::SetTags(tags) => parts.tags = tags,
            InterceptVerdict::Refuse(r) => return Err(Box::new(refused(interceptor, r, id))),
        }
    }
    if parts.tags != ctx.scope.tags {
        ctx.scope.tags = parts.tags.clone();
    }
    let after = chain.iter().any(|i| i.runs_at(InterceptPoint::ServerAfter));
    Ok(after.then_some(parts))
}

/// `server-after`: `answer`, or the error frame of a refusal in its place.
pub fn after(chain: &[Arc<InterceptorPlugin>], parts: &Parts, answer: Frame) -> Frame {
    let point = InterceptPoint::ServerAfter;
    let outcome = answer
        .meta
        .error_class
        .map(ErrorClass::as_str)
        .unwrap_or("");
    for interceptor in chain.iter().filter(|i| i.runs_at(point)) {
        let call = view(point, parts, &parts.traceparent, &parts.payload, outcome);
        match interceptor.intercept(&call).verdict {
            InterceptVerdict::Refuse(r) => return refused(interceptor, r, answer.id),
            // The host refuses set-tags at an after point as an invalid answer.
            InterceptVerdict::Pass | InterceptVerdict::SetTags(_) => {}
        }
    }
    answer
}

/// The error frame of a refusal: its class (one the host let through), the interceptor
/// named in the message so the caller can tell who said no.
fn refused(interceptor: &InterceptorPlugin, r: Refusal, id: u64) -> Frame {
    let class = ErrorClass::ALL
        .into_iter()
        .find(|c| c.as_str() == r.class)
        .unwrap_or(ErrorClass::Internal);
    Frame::error(
        id,
        class,
        format!(
            "refused by interceptor `{}`: {}",
            interceptor.name(),
            r.message
        ),
    )
}
