//! The admin endpoint's HTTP face, on the same listener as its frame protocol (the accept
//! loop in `listener.rs` tells them apart by their first byte): curl and Prometheus read
//! it. Each route runs the same admin method `axle stats` and `axle swap` reach over
//! frames; only `/metrics` (text for Prometheus), `/healthz` and `/readyz` are HTTP's own.
//!
//! | route | answers |
//! |---|---|
//! | `GET /metrics` | Prometheus text (`metrics.rs`) |
//! | `GET /stats` | the `stats` method's JSON, as `axle stats --json` prints it |
//! | `GET /` | the live dashboard (`dashboard.rs`; its script and style beside it) |
//! | `GET /plugins` | the `plugins` method's JSON |
//! | `GET /events?since=N` | the `events` method's JSON: recent health, breaker, quarantine changes |
//! | `GET /healthz` | 200 while the process serves |
//! | `GET /readyz` | 200 when the kernel says it is ready and no server is stopping, else 503 |
//! | `POST /swap` | the `swap` method (JSON body), with `Authorization: Bearer TOKEN` |

pub mod dashboard;
pub mod exposition;
pub mod metrics;
pub mod token;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use serde_json::Value;

use crate::{AdminMethod, StatsReport, Targets};
use axle_wire::ErrorClass;
use token::{Refusal, Token};

/// The largest request body read (a swap's JSON is tens of bytes).
const MAX_BODY: usize = 64 * 1024;

/// How long a client may take to send its request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

const ROUTES: &str = "GET /, GET /metrics, GET /stats, GET /plugins, GET /events?since=N, \
                      GET /healthz, GET /readyz, POST /swap";

/// What the HTTP routes act on.
pub struct HttpAdmin {
    pub targets: Arc<Targets>,
    pub methods: BTreeMap<String, AdminMethod>,
    pub token: Option<Token>,
    /// Set by the kernel once it serves (and is registered); cleared when it stops.
    pub ready: Arc<AtomicBool>,
}

type Answer = Response<Full<Bytes>>;

/// Serves HTTP/1.1 on one accepted connection until the client closes it.
pub async fn serve_connection(stream: tokio::net::TcpStream, admin: Arc<HttpAdmin>) {
    let service = hyper::service::service_fn(move |req| {
        let admin = admin.clone();
        async move { Ok::<_, Infallible>(route(&admin, req).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("admin HTTP connection ended: {e}");
    }
}

async fn route(admin: &HttpAdmin, req: Request<Incoming>) -> Answer {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => readiness(admin),
        (&Method::GET, "/metrics") => {
            let body = metrics::render(&StatsReport::of(&admin.targets));
            let mut r = text(StatusCode::OK, body);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        (&Method::GET, "/stats") => call(admin, "stats", Value::Null).await,
        (&Method::GET, "/plugins") => call(admin, "plugins", Value::Null).await,
        (&Method::GET, "/events") => match since(req.uri().query()) {
            Ok(since) => call(admin, "events", serde_json::json!({ "since": since })).await,
            Err(message) => error(StatusCode::BAD_REQUEST, "bad_request", &message),
        },
        (&Method::GET, path) if dashboard::asset(path).is_some() => dashboard::serve(
            path,
            admin.token.is_some() && admin.methods.contains_key("swap"),
        ),
        (&Method::POST, "/swap") => swap(admin, req).await,
        (_, "/healthz" | "/readyz" | "/metrics" | "/stats" | "/plugins" | "/events" | "/swap")
        | (_, "/" | "/dashboard.js" | "/dashboard.css") => {
            let allow = if path == "/swap" { "POST" } else { "GET" };
            let mut r = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                &format!("{path} takes {allow}"),
            );
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            r
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no route {path}; the routes: {ROUTES}"),
        ),
    }
}

/// The `since` of `/events?since=N` (absent: 0, every event kept).
fn since(query: Option<&str>) -> Result<u64, String> {
    let value = query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="));
    match value {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| format!("since={v}: expected a whole number ≥ 0")),
    }
}

fn readiness(admin: &HttpAdmin) -> Answer {
    if let Some((name, _)) = admin.targets.servers.iter().find(|(_, s)| s.is_closing()) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: server `{name}` is stopping\n"),
        );
    }
    if !admin.ready.load(Relaxed) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: starting or stopping\n",
        );
    }
    text(StatusCode::OK, "ready\n")
}

async fn swap(admin: &HttpAdmin, req: Request<Incoming>) -> Answer {
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match token::check(admin.token.as_ref(), authorization) {
        Ok(()) => {}
        Err(Refusal::NotConfigured) => {
            return error(
                StatusCode::FORBIDDEN,
                "forbidden",
                &format!(
                    "POST /swap needs a token, and this kernel has none: start it with \
                     --admin-token-file PATH or {}=TOKEN",
                    token::TOKEN_ENV
                ),
            )
        }
        Err(Refusal::Missing) => {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send the admin token: Authorization: Bearer TOKEN",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
        Err(Refusal::Wrong) => {
            return error(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the admin token is not this kernel's",
            )
        }
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("cannot read the body (at most {MAX_BODY} bytes): {e}"),
            )
        }
    };
    match serde_json::from_slice(&body) {
        Ok(body) => call(admin, "swap", body).await,
        Err(e) => error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            &format!("the body is not JSON: {e}"),
        ),
    }
}

/// Runs admin method `name` (the one the frame protocol reaches too).
async fn call(admin: &HttpAdmin, name: &str, body: Value) -> Answer {
    let Some(m) = admin.methods.get(name) else {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("this kernel does not offer `{name}`"),
        );
    };
    match m(admin.targets.clone(), body).await {
        Ok(answer) => {
            let mut text_ = serde_json::to_string_pretty(&answer).unwrap_or_default();
            text_.push('\n');
            json(StatusCode::OK, text_)
        }
        Err(status) => error(
            status_of(status.class),
            status.class.as_str(),
            &status.message,
        ),
    }
}

/// The HTTP status of an admin method's error class.
fn status_of(class: ErrorClass) -> StatusCode {
    match class {
        ErrorClass::BadRequest | ErrorClass::Business => StatusCode::BAD_REQUEST,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::Forbidden => StatusCode::FORBIDDEN,
        ErrorClass::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorClass::Overloaded | ErrorClass::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        ErrorClass::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json(status: StatusCode, body: String) -> Answer {
    let mut r = text(status, body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// `{"error": CLASS, "message": ...}` with `status`.
fn error(status: StatusCode, class: &str, message: &str) -> Answer {
    let body = serde_json::json!({ "error": class, "message": message });
    json(status, format!("{body}\n"))
}

#[cfg(test)]
mod tests;
