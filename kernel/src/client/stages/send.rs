//! Frame the request, send it on the endpoint's connection, wait for the answer until the
//! deadline; the remaining budget travels in the frame.

use std::time::Instant;

use bytes::Bytes;

use crate::client::registry::{Endpoint, ServiceState};
use crate::client::{CallError, CallOptions, Reply};
use crate::wire::{Metadata, FLAG_EXTERNAL};

/// One attempt at one endpoint.
#[allow(clippy::too_many_arguments)]
pub async fn send(
    ep: &Endpoint,
    svc: &ServiceState,
    method: &str,
    body: Bytes,
    content_type: &str,
    options: &CallOptions,
    deadline: Instant,
    budget: std::time::Duration,
) -> Result<Reply, CallError> {
    let conn = ep.link.connection().await?;
    let meta = Metadata {
        service: Some(svc.name.clone()),
        method: Some(method.to_string()),
        // The budget as of the call's start: the few µs spent routing are the callee's
        // safety margin, and it saves a clock read.
        deadline_us: Some(budget.as_micros() as u64),
        consumer_app: options
            .consumer_app
            .clone()
            .or_else(|| svc.consumer_app.clone()),
        tags: options.tags.clone(),
        content_type: Some(content_type.to_string()),
        ..Metadata::default()
    };
    let flags = if options.external { FLAG_EXTERNAL } else { 0 };
    let frame = conn.call(flags, meta, body, deadline).await?;
    match frame.meta.error_class {
        Some(class) => Err(CallError::Remote {
            class,
            message: frame.meta.error_message.unwrap_or_default(),
            retry_after_ms: frame.meta.retry_after_ms,
        }),
        None => Ok(Reply {
            payload: frame.payload,
            content_type: frame
                .meta
                .content_type
                .unwrap_or_else(|| crate::payload::RAW.to_string()),
            endpoint: Some(ep.id),
            fallback: false,
        }),
    }
}
