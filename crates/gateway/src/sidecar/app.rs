//! The application beside the sidecar, over loopback HTTP: its health URL (polled until
//! it answers, so the sidecar registers only a ready application) and one
//! `POST /{service}/{method}` per Axle request, whose HTTP status becomes the answer's
//! error class by the table in [`crate::status`].

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use axle::server::{Context, Status};
use axle::wire::ErrorClass;

use crate::request::{APP_HEADER, TAG_PREFIX, TIMEOUT_HEADER, TRACEPARENT_HEADER};
use crate::status::class_of;

/// Tells the application whether the request came from outside the trust boundary.
pub const EXTERNAL_HEADER: &str = "x-axle-external";

/// The longest error message taken from an application's answer.
const MAX_MESSAGE: usize = 512;

/// The application's base URL and a keep-alive HTTP client to it.
#[derive(Clone)]
pub struct App {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl App {
    /// `url` is `http://HOST:PORT` (plain HTTP: the application is on this host).
    pub fn new(url: &str) -> anyhow::Result<App> {
        let uri: Uri = url
            .parse()
            .map_err(|e| anyhow::anyhow!("--app `{url}`: {e}"))?;
        anyhow::ensure!(
            uri.scheme_str() == Some("http") && uri.authority().is_some(),
            "--app `{url}`: expected http://HOST:PORT"
        );
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Ok(App {
            base: url.trim_end_matches('/').to_string(),
            http: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// Polls `GET {base}{path}` until it answers 2xx, for at most `timeout`.
    pub async fn wait_healthy(&self, path: &str, timeout: Duration) -> Result<(), String> {
        let url = format!("{}{path}", self.base);
        let until = Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        while Instant::now() < until {
            let request = Request::get(&url).body(Full::new(Bytes::new()));
            let request = request.map_err(|e| format!("{url}: {e}"))?;
            match tokio::time::timeout(Duration::from_secs(1), self.http.request(request)).await {
                Ok(Ok(r)) if r.status().is_success() => return Ok(()),
                Ok(Ok(r)) => last = format!("answered {}", r.status()),
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "no answer within 1 s".into(),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "the application at {url} was not healthy within {} ms ({last})",
            timeout.as_millis()
        ))
    }

    /// Forwards one request: the JSON body to `POST /{service}/{method}` with the
    /// request's scope as `x-axle-*` headers and its trace as `traceparent` (the
    /// handler's span, so the application's own spans are its children), within what is
    /// left of its deadline.
    pub async fn call(&self, ctx: &Context, body: Bytes) -> Result<Bytes, Status> {
        let url = format!("{}/{}/{}", self.base, ctx.service, ctx.method);
        let mut request = Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(
                EXTERNAL_HEADER,
                if ctx.scope.external { "true" } else { "false" },
            )
            .body(Full::new(body))
            .map_err(|e| Status::internal(format!("{url}: {e}")))?;
        let headers = request.headers_mut();
        let remaining = ctx.remaining();
        if let Some(left) = remaining {
            headers.insert(
                TIMEOUT_HEADER,
                HeaderValue::from(left.as_millis().max(1) as u64),
            );
        }
        if let Some(app) = ctx.scope.consumer_app.as_deref() {
            if let Ok(v) = HeaderValue::from_str(app) {
                headers.insert(APP_HEADER, v);
            }
        }
        if let Some(Ok(v)) = ctx.traceparent().map(HeaderValue::try_from) {
            headers.insert(TRACEPARENT_HEADER, v);
        }
        for (k, v) in &ctx.scope.tags {
            let name = http::HeaderName::from_bytes(format!("{TAG_PREFIX}{k}").as_bytes());
            if let (Ok(name), Ok(v)) = (name, HeaderValue::from_str(v)) {
                headers.insert(name, v);
            }
        }
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| {
                if e.is_connect() {
                    // Nothing reached the application: the caller may fail over.
                    Status {
                        class: ErrorClass::Overloaded,
                        ..Status::internal(format!("the application is not reachable: {e}"))
                    }
                } else {
                    Status::internal(format!("the application failed to answer: {e}"))
                }
            })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| Status::internal(format!("the application's answer broke off: {e}")))?
                .to_bytes();
            Ok::<_, Status>((status, body))
        };
        let (status, body) = match remaining {
            Some(left) => tokio::time::timeout(left, exchange)
                .await
                .map_err(|_| Status {
                    class: ErrorClass::DeadlineExceeded,
                    ..Status::internal("the application did not answer within the deadline")
                })??,
            None => exchange.await?,
        };
        answer(status, body)
    }
}

/// The application's answer as an Axle answer: a 2xx body must be JSON (empty is
/// `null`); any other status is its error class with the body's message.
fn answer(status: StatusCode, body: Bytes) -> Result<Bytes, Status> {
    let Some(class) = class_of(status) else {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Bytes::from_static(b"null"));
        }
        return match serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            Ok(_) => Ok(body),
            Err(e) => Err(Status::internal(format!(
                "the application answered {status} with a body that is not JSON: {e}"
            ))),
        };
    };
    Err(Status {
        class,
        ..Status::internal(message(status, &body))
    })
}

/// `error.message` of a JSON error body, else the body's text, else the status.
fn message(status: StatusCode, body: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let from_json = json.as_ref().and_then(|j| {
        j.pointer("/error/message")
            .or_else(|| j.get("error"))
            .or_else(|| j.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let text = if text.is_empty() {
        format!("the application answered {status}")
    } else {
        text
    };
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_become_classes_with_the_apps_message() {
        let ok = answer(StatusCode::OK, Bytes::from_static(b"{\"a\":1}")).unwrap();
        assert_eq!(ok, "{\"a\":1}");
        assert_eq!(
            answer(StatusCode::NO_CONTENT, Bytes::new()).unwrap(),
            "null"
        );
        let e = answer(StatusCode::OK, Bytes::from_static(b"<html>")).unwrap_err();
        assert_eq!(e.class, ErrorClass::Internal);
        let e = answer(
            StatusCode::CONFLICT,
            Bytes::from_static(br#"{"error": {"message": "taken"}}"#),
        )
        .unwrap_err();
        assert_eq!(
            (e.class, e.message.as_str()),
            (ErrorClass::Business, "taken")
        );
        let e = answer(StatusCode::SERVICE_UNAVAILABLE, Bytes::from_static(b"busy")).unwrap_err();
        assert_eq!(
            (e.class, e.message.as_str()),
            (ErrorClass::Overloaded, "busy")
        );
        let e = answer(StatusCode::NOT_FOUND, Bytes::new()).unwrap_err();
        assert_eq!(e.class, ErrorClass::NotFound);
        assert!(e.message.contains("404"), "{}", e.message);
        let long = "x".repeat(2000);
        let e = answer(StatusCode::INTERNAL_SERVER_ERROR, long.into()).unwrap_err();
        assert!(e.message.chars().count() <= MAX_MESSAGE + 1);
    }

    /// An application answering one request with `{}`; the request's head, lower case.
    async fn one_request_app() -> (String, tokio::sync::oneshot::Receiver<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0];
                if s.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                          content-length: 2\r\nconnection: close\r\n\r\n{}";
            s.write_all(answer.as_bytes()).await.unwrap();
            let _ = tx.send(head);
        });
        (url, rx)
    }

    #[tokio::test]
    async fn the_application_gets_the_requests_trace_as_traceparent() {
        let (url, head) = one_request_app().await;
        let trace = axle::core::TraceContext::parse(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .unwrap();
        let ctx = Context {
            service: "greeter".into(),
            method: "hello".into(),
            peer: "127.0.0.1:1".parse().unwrap(),
            peer_identity: None,
            scope: axle::core::RequestScope {
                trace: Some(trace),
                ..Default::default()
            },
        };
        let answer = App::new(&url)
            .unwrap()
            .call(&ctx, Bytes::from_static(b"{}"))
            .await;
        assert_eq!(answer.unwrap(), "{}");
        let head = head.await.unwrap();
        assert!(
            head.contains(&format!("traceparent: {}\r\n", trace.traceparent())),
            "{head}"
        );
    }

    #[test]
    fn only_plain_http_urls_are_apps() {
        assert!(App::new("http://127.0.0.1:9000").is_ok());
        for bad in [
            "https://127.0.0.1:9000",
            "127.0.0.1:9000",
            "http://",
            "not a url",
        ] {
            assert!(App::new(bad).is_err(), "{bad}");
        }
    }
}
