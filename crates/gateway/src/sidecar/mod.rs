//! The sidecar: Axle on behalf of an application in any language, on the same host.
//!
//! - Provider side ([`provide`]): the services the manifest lists under
//!   `[sidecar.provides]` are served through the full server pipeline (trust, limiter,
//!   guards, fuse, internal-only); each request that passes is forwarded to the
//!   application ([`app::App`]) and its HTTP status mapped back to an error class.
//! - Consumer side: the application calls other services through a loopback HTTP
//!   listener, the gateway's own code ([`crate::Forwarder::local`]; not external).
//!
//! Start is inside-out and stop outside-in, as for `axle serve`: the server's readiness
//! is the application's health URL, so registration waits for it; shutdown deregisters
//! and drains before the application's outbound listener closes.

pub mod app;

use std::collections::BTreeMap;
use std::sync::Arc;

use axle::payload;
use axle::server::{Handler, Response, ServerBuilder, Status};

use app::App;

/// The JSON serializer's content type: the sidecar passes such bodies through untouched.
pub const JSON: &str = "application/json";

/// Registers a handler forwarding to `app` for every method of `provides` (a service
/// with no method list: any method).
pub fn provide(
    mut builder: ServerBuilder,
    app: &App,
    provides: &BTreeMap<String, Vec<String>>,
) -> ServerBuilder {
    let handler = forwarding(app.clone());
    for (service, methods) in provides {
        if methods.is_empty() {
            builder = builder.any_method(service, handler.clone());
        }
        for method in methods {
            builder = builder.method(service, method, handler.clone());
        }
    }
    builder
}

/// One handler for every provided method: the request's JSON to the application, its
/// answer back in the same content type.
fn forwarding(app: App) -> Handler {
    Arc::new(move |request| {
        let app = app.clone();
        Box::pin(async move {
            if request.content_type != JSON && request.content_type != payload::RAW {
                return Err(Status::bad_request(format!(
                    "the sidecar forwards JSON; content type `{}` is not served here",
                    request.content_type
                )));
            }
            let body = app.call(&request.ctx, request.payload).await?;
            Ok(Response {
                payload: body,
                content_type: request.content_type,
            })
        })
    })
}
