//! Frame the request, send it on the endpoint's connection, wait for the answer until the
//! deadline; the remaining budget and the trace context (the call's trace, this attempt's
//! span) travel in the frame. Dialling counts against the budget too: a connect is cut
//! to what is left of it.

use std::future::Future;
use std::time::Duration;

use crate::state::Endpoint;
use crate::{Call, CallError, Reply};
use axle_transport::TransportError;
use axle_wire::{Metadata, TextFields, FLAG_EXTERNAL};

/// One attempt at one endpoint; `budget` is what is left of the call's deadline, `span_id`
/// the attempt's span (the provider's parent).
// An `async move` block, not an `async fn`: its state keeps the arguments once
// (`Client::invoke` in pipeline.rs says why that matters).
#[allow(clippy::manual_async_fn)]
pub fn send<'a, 'b>(
    ep: &'a Endpoint,
    call: &'a Call<'b>,
    budget: Duration,
    span_id: [u8; 8],
) -> impl Future<Output = Result<Reply, CallError>> + use<'a, 'b> {
    async move {
        let svc = call.svc;
        // The text fields straight from the borrowed strings: no `String` per field per call.
        let text = TextFields {
            service: &svc.name,
            method: call.method,
            consumer_app: call
                .options
                .consumer_app
                .as_deref()
                .or(svc.consumer_app.as_deref()),
            tags: &call.options.tags,
            content_type: call.content_type,
        };
        let meta = Metadata {
            encoded: text
                .encode()
                .map_err(|e| TransportError::Frame(e.to_string()))?,
            deadline_us: Some(budget.as_micros() as u64),
            request_id: Some(call.request_id),
            trace_id: Some(call.trace.trace_id),
            span_id: Some(span_id),
            trace_flags: call.trace.flags,
            ..Metadata::default()
        };
        let flags = if call.options.external {
            FLAG_EXTERNAL
        } else {
            0
        };
        // The endpoint's connection (dialled first if there is none), not held while the
        // answer is awaited: the link finds it again if this call is dropped.
        let frame = ep
            .link
            .call(flags, meta, call.body.clone(), call.deadline)
            .await?;
        match frame.meta.error_class {
            Some(class) => Err(CallError::Remote {
                class,
                message: frame.meta.error_message.unwrap_or_default(),
                retry_after_ms: frame.meta.retry_after_ms,
                code: frame.meta.error_code,
            }),
            None => Ok(Reply {
                payload: frame.payload,
                content_type: frame.meta.content_type.unwrap_or_default(),
                endpoint: Some(ep.id),
                fallback: false,
            }),
        }
    }
}
