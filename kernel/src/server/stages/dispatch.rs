//! Finds the handler, refuses work whose deadline has already passed, and runs the handler
//! within the remaining budget.

use std::time::Instant;

use crate::server::{Context, Pipeline, Request};
use crate::wire::{ErrorClass, Frame};

pub async fn dispatch(p: &Pipeline, ctx: Context, request: Frame) -> Frame {
    let id = request.id;
    let Some(handler) = p
        .handlers
        .get(ctx.service.as_str())
        .and_then(|methods| methods.get(ctx.method.as_str()))
        .or_else(|| p.any_method.get(ctx.service.as_str()))
        .cloned()
    else {
        return Frame::error(
            id,
            ErrorClass::NotFound,
            format!("no method {}/{} here", ctx.service, ctx.method),
        );
    };
    if ctx.deadline.is_some_and(|d| d <= Instant::now()) {
        return Frame::error(
            id,
            ErrorClass::DeadlineExceeded,
            "the deadline passed before the handler started",
        );
    }
    let deadline = ctx.deadline;
    let req = Request {
        ctx,
        content_type: request
            .meta
            .content_type
            .unwrap_or_else(|| crate::payload::RAW.to_string()),
        payload: request.payload,
    };
    let run = handler(req);
    let result = match deadline {
        Some(d) => match tokio::time::timeout_at(d.into(), run).await {
            Ok(r) => r,
            Err(_) => {
                return Frame::error(
                    id,
                    ErrorClass::DeadlineExceeded,
                    "the handler ran out of time",
                )
            }
        },
        None => run.await,
    };
    match result {
        Ok(resp) => Frame::response(id, Some(resp.content_type), resp.payload),
        Err(status) => Frame::error(id, status.class, status.message),
    }
}
