//! `axle bench gateway`: what the HTTP gateway adds. In one run, over loopback, an HTTP
//! client with keep-alive connections sends the same small JSON body to:
//!
//! - `http-direct` — an echo served by hyper itself (the floor: HTTP alone);
//! - `gateway` — `axle gateway`'s code (routes, headers, the limiter keyed on the
//!   client, the JSON serializer plugin, the full client pipeline) → Axle → the `echo`
//!   service behind the full server pipeline.
//!
//! The difference of the two p50s at concurrency 1 is the gateway's cost per request
//! (target: at most 100 µs on loopback).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client as HttpClient};
use hyper_util::rt::{TokioExecutor, TokioIo};

use axle::client::{Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::server::ServerBuilder;
use axle_gateway::{ClientLimiter, Forwarder, HttpListener};

use crate::rpc::{drive, Cell, Row};

/// The request body every system answers.
/// (Keys in order: the answer is the JSON serializer's, which writes them sorted.)
pub const BODY: &str = r#"{"items":[1,2,3],"note":"a small JSON request, as an HTTP client would send it to a service","user":"ada"}"#;

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub body_bytes: usize,
    pub seconds_per_run: f64,
    pub rows: Vec<Row>,
    /// Gateway p50 − direct p50 at concurrency 1 (target ≤ 100 µs).
    pub added_p50_us: f64,
    /// Gateway req/s ÷ direct req/s at the highest concurrency.
    pub throughput_ratio: f64,
}

/// Runs both systems at every concurrency for `duration` each.
pub async fn run(
    host: &PluginHost,
    manifest: &Manifest,
    duration: Duration,
    concurrencies: &[usize],
) -> anyhow::Result<Report> {
    let (direct_addr, direct) = start_direct_echo().await?;
    let server =
        axle::services::echo::register(ServerBuilder::new().with_manifest(host, manifest)?)
            .bind("127.0.0.1:0")
            .await?;
    let mut m = manifest.clone();
    m.endpoints.clear();
    m.endpoints.insert(
        "echo".into(),
        vec![EndpointSpec::new(server.local_addr().to_string())],
    );
    let client = Client::new(host, ClientConfig::new(m.clone()))?;
    let limiter = ClientLimiter::from_manifest(host, &m)?;
    let gateway = HttpListener::bind(
        "127.0.0.1:0",
        Arc::new(Forwarder::gateway(client, &m, limiter)),
    )
    .await?;

    let http: HttpClient<HttpConnector, Full<Bytes>> = {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        HttpClient::builder(TokioExecutor::new()).build(connector)
    };
    let mut rows = Vec::new();
    for (system, url) in [
        ("http-direct", format!("http://{direct_addr}/echo/echo")),
        (
            "gateway",
            format!("http://{}/echo/echo", gateway.local_addr()),
        ),
    ] {
        for &c in concurrencies {
            let (http, url) = (http.clone(), url.clone());
            rows.push(
                drive(cell(system, c, duration), move || {
                    let (http, url) = (http.clone(), url.clone());
                    async move { post(&http, &url).await }
                })
                .await,
            );
        }
    }
    gateway.shutdown(Duration::from_millis(200)).await;
    server.shutdown(Duration::from_millis(200)).await;
    direct.abort();
    let find = |system: &str, c: usize| {
        rows.iter()
            .find(|r| r.system == system && r.concurrency == c)
    };
    let low = concurrencies.iter().copied().min().unwrap_or(1);
    let top = concurrencies.iter().copied().max().unwrap_or(1);
    let added_p50_us = match (find("gateway", low), find("http-direct", low)) {
        (Some(g), Some(d)) => g.p50_us - d.p50_us,
        _ => f64::NAN,
    };
    let throughput_ratio = match (find("gateway", top), find("http-direct", top)) {
        (Some(g), Some(d)) => g.req_per_s / d.req_per_s.max(1e-9),
        _ => f64::NAN,
    };
    Ok(Report {
        body_bytes: BODY.len(),
        seconds_per_run: duration.as_secs_f64(),
        rows,
        added_p50_us,
        throughput_ratio,
    })
}

/// One POST; true when it answered 200 with the body it was sent.
async fn post(http: &HttpClient<HttpConnector, Full<Bytes>>, url: &str) -> bool {
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(BODY.as_bytes())));
    let Ok(request) = request else {
        return false;
    };
    match http.request(request).await {
        Ok(response) if response.status() == http::StatusCode::OK => {
            match response.into_body().collect().await {
                Ok(body) => body.to_bytes() == BODY.as_bytes(),
                Err(_) => false,
            }
        }
        _ => false,
    }
}

/// An echo served by hyper directly: the body back, as JSON.
async fn start_direct_echo() -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let builder = Arc::new(hyper_util::server::conn::auto::Builder::new(
            TokioExecutor::new(),
        ));
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let builder = builder.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |req: http::Request<hyper::body::Incoming>| async move {
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let mut response = http::Response::new(Full::new(body));
                        response.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, Infallible>(response)
                    },
                );
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

/// A cell of this bench: [`BODY`] at `concurrency`, with `axle bench rpc`'s warm-up.
fn cell(system: &str, concurrency: usize, duration: Duration) -> Cell<'_> {
    Cell {
        system,
        payload_bytes: BODY.len(),
        concurrency,
        duration,
        warm_up: Duration::from_millis(200),
    }
}
