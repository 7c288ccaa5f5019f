//! Handlers: raw (bytes in, bytes out) and typed (serde in and out, through the serializer
//! plugin of the request's content type).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::Context;
use axle_core::payload;
use axle_plugin_host::kinds::serializer::{SerializeError, SerializerPlugin};
use axle_wire::{ContentType, ErrorClass};

/// A request as a handler sees it.
pub struct Request {
    pub ctx: Context,
    pub payload: Bytes,
    pub content_type: ContentType,
}

/// A handler's answer.
pub struct Response {
    pub payload: Bytes,
    pub content_type: ContentType,
}

/// A handler's refusal: an error class, a message for the caller and, for a business
/// error, an optional machine-readable code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub class: ErrorClass,
    pub message: String,
    /// With `business`: what callers may match on, e.g. list in `retry-on-business`.
    pub code: Option<String>,
}

impl Status {
    /// A refusal of `class`.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Status {
            class,
            message: message.into(),
            code: None,
        }
    }

    /// A business error: the handler ran and says no (final, unless the caller lists its
    /// code in `retry-on-business`).
    pub fn business(message: impl Into<String>) -> Self {
        Status::new(ErrorClass::Business, message)
    }

    /// A business error with a code callers can match on (`conflict`, `stale-read`).
    pub fn business_code(code: impl Into<String>, message: impl Into<String>) -> Self {
        Status {
            code: Some(code.into()),
            ..Status::business(message)
        }
    }

    /// An unexpected failure.
    pub fn internal(message: impl Into<String>) -> Self {
        Status::new(ErrorClass::Internal, message)
    }

    /// A request that cannot be understood.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(ErrorClass::BadRequest, message)
    }
}

/// A raw handler.
pub type Handler = Arc<dyn Fn(Request) -> HandlerFuture + Send + Sync>;

/// What a handler returns: its answer, to come.
pub type HandlerFuture = BoxFuture<'static, Result<Response, Status>>;

/// Wraps a typed function as a raw handler.
pub fn typed<Req, Resp, F, Fut>(
    serializers: Arc<HashMap<String, Arc<SerializerPlugin>>>,
    f: F,
) -> Handler
where
    Req: serde::de::DeserializeOwned + Send + 'static,
    Resp: serde::Serialize + Send + 'static,
    F: Fn(Req, Context) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Resp, Status>> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |request: Request| {
        let serializers = serializers.clone();
        let f = f.clone();
        Box::pin(async move {
            let serializer = serializers
                .get(request.content_type.as_str())
                .cloned()
                .ok_or_else(|| {
                    Status::bad_request(format!(
                        "content type `{}` is not served here (serializers: {})",
                        request.content_type,
                        serializers.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))
                })?;
            let value = serializer.decode(&request.payload).map_err(|e| match e {
                SerializeError::Rejected(why) => {
                    Status::bad_request(format!("cannot decode the request: {why}"))
                }
                // The plugin failed, not the request; the handler has not run, so the
                // caller may fail over as from a busy provider.
                SerializeError::Fault(fault) => Status::new(
                    ErrorClass::Overloaded,
                    format!("the provider's serializer failed: {fault}"),
                ),
            })?;
            let req: Req = payload::from_value(&value)
                .map_err(|e| Status::bad_request(format!("unexpected request shape: {e}")))?;
            let resp = f(req, request.ctx).await?;
            let value = payload::to_value(&resp).map_err(Status::internal)?;
            let bytes = serializer
                .encode(&value)
                .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))?;
            Ok(Response {
                payload: Bytes::from(bytes),
                content_type: request.content_type,
            })
        })
    })
}
