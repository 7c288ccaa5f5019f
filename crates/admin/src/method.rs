//! An admin method: JSON in, JSON out, with the kernel's [`Targets`] at hand. Methods are
//! raw handlers of the `axle.admin` service that parse JSON themselves, so the admin path
//! depends on no serializer plugin (it must work while plugins are being swapped or are
//! broken).

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;

use super::Targets;
use axle_server::{Handler, Request, Response, Status};

/// The content type of admin requests and answers (the `json` serializer's, so a regular
/// client with that plugin can call the admin endpoint too).
pub const JSON: &str = "application/json";

/// One admin method.
pub type AdminMethod =
    Arc<dyn Fn(Arc<Targets>, Value) -> BoxFuture<'static, Result<Value, Status>> + Send + Sync>;

/// Wraps a function as an [`AdminMethod`].
pub fn method<F, Fut>(f: F) -> AdminMethod
where
    F: Fn(Arc<Targets>, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, Status>> + Send + 'static,
{
    Arc::new(move |targets, body| Box::pin(f(targets, body)))
}

/// The raw handler that serves `m`: decodes the request body (empty: `null`), runs the
/// method, encodes its answer.
pub fn handler(targets: Arc<Targets>, m: AdminMethod) -> Handler {
    Arc::new(move |req: Request| {
        let (targets, m) = (targets.clone(), m.clone());
        Box::pin(async move {
            if req.content_type != JSON && req.content_type != axle_core::payload::RAW {
                return Err(Status::bad_request(format!(
                    "admin methods take {JSON}, not `{}`",
                    req.content_type
                )));
            }
            let body = if req.payload.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&req.payload)
                    .map_err(|e| Status::bad_request(format!("the request is not JSON: {e}")))?
            };
            let answer = m(targets, body).await?;
            let bytes = serde_json::to_vec(&answer)
                .map_err(|e| Status::internal(format!("cannot encode the answer: {e}")))?;
            Ok(Response {
                payload: Bytes::from(bytes),
                content_type: JSON.into(),
            })
        })
    })
}
