//! HTTP → Axle: one HTTP request becomes one call through the full client pipeline
//! (plugins, governance, health, discovery), and its answer or error an HTTP response.
//! The gateway and the sidecar's local listener are the same code; they differ in
//! whether a request counts as external and whether the caller's address is limited.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;

use axle::client::Client;
use axle::manifest::{GatewaySpec, Manifest};
use axle::payload;

use crate::limit::ClientLimiter;
use crate::request::{self, FALLBACK_HEADER};
use crate::routes::{Miss, Routes};
use crate::status::{json_response, HttpError};

/// Turns HTTP requests into Axle calls.
pub struct Forwarder {
    client: Client,
    manifest: Arc<Manifest>,
    routes: Routes,
    spec: GatewaySpec,
    /// Requests through here come from outside the trust boundary (the gateway), or from
    /// an application on the same host (the sidecar's local listener).
    external: bool,
    /// The manifest's limiter, keyed on the HTTP client's address (the provider only
    /// sees the gateway's).
    limiter: Option<ClientLimiter>,
}

/// The services `POST /{service}/{method}` reaches: every one the manifest names (its
/// endpoint lists, `[services.*]` tables, routes).
pub fn services(manifest: &Manifest) -> BTreeSet<String> {
    let mut all: BTreeSet<String> = manifest.endpoints.keys().cloned().collect();
    all.extend(manifest.services.keys().cloned());
    all.extend(manifest.service_governance.keys().cloned());
    all.extend(manifest.gateway.routes.iter().map(|r| r.service.clone()));
    all
}

impl Forwarder {
    /// The edge: every request is external, and the limiter sees each client's address.
    pub fn gateway(client: Client, manifest: &Manifest, limiter: Option<ClientLimiter>) -> Self {
        Forwarder::new(client, manifest, true, limiter)
    }

    /// A sidecar's local listener: calls from the application beside it are internal.
    pub fn local(client: Client, manifest: &Manifest) -> Self {
        Forwarder::new(client, manifest, false, None)
    }

    fn new(
        client: Client,
        manifest: &Manifest,
        external: bool,
        limiter: Option<ClientLimiter>,
    ) -> Self {
        let spec = manifest.gateway.clone();
        Forwarder {
            routes: Routes::new(spec.routes.clone(), services(manifest), spec.max_timeout),
            client,
            manifest: Arc::new(manifest.clone()),
            spec,
            external,
            limiter,
        }
    }

    /// The header read timeout the listener enforces.
    pub fn header_read_timeout(&self) -> std::time::Duration {
        self.spec.header_read_timeout
    }

    /// Answers one HTTP request from `peer`; never fails (errors are JSON responses).
    pub async fn handle<B>(&self, req: Request<B>, peer: SocketAddr) -> Response<Full<Bytes>>
    where
        B: hyper::body::Body,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        match self.answer(req, peer).await {
            Ok(response) => response,
            Err(e) => e.into_response(),
        }
    }

    async fn answer<B>(
        &self,
        req: Request<B>,
        peer: SocketAddr,
    ) -> Result<Response<Full<Bytes>>, HttpError>
    where
        B: hyper::body::Body,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (parts, body) = req.into_parts();
        let target = self
            .routes
            .find(parts.method.as_str(), parts.uri.path())
            .map_err(|miss| match miss {
                Miss::NoRoute => HttpError::not_found(format!(
                    "no route for {} {} (POST /{{service}}/{{method}} reaches: {})",
                    parts.method,
                    parts.uri.path(),
                    self.routes_hint()
                )),
                Miss::WrongMethod { allowed } => HttpError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    format!(
                        "{} {}: use {}",
                        parts.method,
                        parts.uri.path(),
                        allowed.join(", ")
                    ),
                ),
            })?;
        let options = request::options(&parts.headers, target.max_timeout, self.external)?;
        // Checked here, before any work: the provider would refuse it too (`forbidden`),
        // but an edge should not spend a round trip on a request it knows is refused.
        if self.external
            && self
                .manifest
                .governance(&target.service, &target.method)
                .internal_only
        {
            return Err(HttpError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("{}/{} is internal-only", target.service, target.method),
            ));
        }
        if let Some(limiter) = &self.limiter {
            limiter.admit(&self.manifest, &target, &options, peer.ip())?;
        }
        let body =
            request::read_body(body, self.spec.max_body_bytes, self.spec.body_read_timeout).await?;
        let json = request::request_value(&body, &target.params)?;
        let value = payload::to_value(&json).map_err(HttpError::bad_request)?;
        let answer = self
            .client
            .call_value_at(&target.service, &target.method, &value, &options)
            .await
            .map_err(|e| HttpError::from_call(&e))?;
        let json = payload::to_json(&answer.value).map_err(|e| {
            HttpError::new(
                StatusCode::BAD_GATEWAY,
                "bad_response",
                format!("the answer has no JSON form: {e}"),
            )
        })?;
        let mut response = json_response(StatusCode::OK, json.to_string().into());
        if answer.fallback {
            response
                .headers_mut()
                .insert(FALLBACK_HEADER, HeaderValue::from_static("true"));
        }
        Ok(response)
    }

    /// The services a 404 lists, so a mistyped name is easy to see.
    fn routes_hint(&self) -> String {
        let all = services(&self.manifest);
        if all.is_empty() {
            "no service (the manifest names none)".into()
        } else {
            all.into_iter().collect::<Vec<_>>().join(", ")
        }
    }
}
