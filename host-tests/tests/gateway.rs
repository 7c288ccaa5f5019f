//! `axle gateway` in front of `axle serve`, real processes over loopback HTTP: calls
//! through routes and `POST /{service}/{method}`, the trust boundary (internal-only is
//! 403), bad input (400, 404, 405, 413), the deadline and tag headers, and slow clients.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axle_host_tests::http::{post, request, AxleProcess};
use axle_host_tests::ServeProcess;

/// The embedded manifest pointed at `provider`, with `kv/put` internal-only, the tag
/// router strict (a request in a lane no endpoint carries finds none) and `[gateway]`.
fn manifest(dir: &std::path::Path, provider: &str) -> PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base
        .replace("127.0.0.1:7300", provider)
        .replacen(
            "[plugins.tag.config]\n",
            "[plugins.tag.config]\nforce = true\n",
            1,
        )
        .replacen(
            "[services.kv.methods.put]\n",
            "[services.kv.methods.put]\ninternal-only = true\n",
            1,
        );
    let text = format!(
        "{text}
[gateway]
max-body-bytes = 4096
header-read-timeout-ms = 300
[gateway.routes]
\"GET /kv/{{key}}\" = \"kv/get\"
\"PUT /kv/{{key}}\" = \"kv/put\"
\"POST /slow/{{id}}\" = {{ call = \"flaky/slow\", max-timeout-ms = 100 }}
"
    );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

struct Setup {
    _dir: tempfile::TempDir,
    _provider: ServeProcess,
    gateway: AxleProcess,
}

/// A provider whose `flaky` service takes 400 ms, and a gateway in front of it.
fn setup() -> Setup {
    let provider = ServeProcess::start(&["--flaky-latency-ms", "400"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = manifest(dir.path(), &provider.addr);
    let gateway = AxleProcess::start(&[
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--manifest",
        manifest.to_str().unwrap(),
    ]);
    Setup {
        _dir: dir,
        _provider: provider,
        gateway,
    }
}

#[test]
fn post_service_method_and_routes_reach_the_provider() {
    let s = setup();
    let g = &s.gateway.addr;
    let a = post(g, "/echo/say", &[], r#"{"hello": "world", "n": [1, 2]}"#);
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.json(), serde_json::json!({"hello": "world", "n": [1, 2]}));
    // An empty body is the empty object.
    let a = post(g, "/echo/say", &[], "");
    assert_eq!((a.status, a.json()), (200, serde_json::json!({})));
    // A route: the path parameter becomes the request's `key`; kv knows no such key.
    let a = request(g, "GET", "/kv/nothing-here", &[], b"").unwrap();
    assert_eq!(a.status, 422, "a business error: {a:?}");
    assert_eq!(a.error_class(), "business");
}

#[test]
fn internal_only_methods_answer_403_at_the_edge() {
    let s = setup();
    let g = &s.gateway.addr;
    let a = request(g, "PUT", "/kv/a", &[], br#"{"value": 1}"#).unwrap();
    assert_eq!(a.status, 403, "{a:?}");
    assert_eq!(a.error_class(), "forbidden");
    let a = post(g, "/kv/put", &[], r#"{"key": "a", "value": 1}"#);
    assert_eq!((a.status, a.error_class().as_str()), (403, "forbidden"));
}

#[test]
fn bad_input_is_answered_with_json_errors() {
    let s = setup();
    let g = &s.gateway.addr;
    let a = post(g, "/echo/say", &[], "{\"a\": ");
    assert_eq!((a.status, a.error_class().as_str()), (400, "bad_request"));
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    let a = post(g, "/nosuch/method", &[], "{}");
    assert_eq!((a.status, a.error_class().as_str()), (404, "not_found"));
    let a = request(g, "DELETE", "/kv/a", &[], b"").unwrap();
    assert_eq!(a.status, 405, "{a:?}");
    let big = format!("{{\"x\": \"{}\"}}", "y".repeat(8192));
    let a = post(g, "/echo/say", &[], &big);
    assert_eq!(
        (a.status, a.error_class().as_str()),
        (413, "payload_too_large")
    );
    let a = post(g, "/echo/say", &[("x-axle-timeout-ms", "soon")], "{}");
    assert_eq!((a.status, a.error_class().as_str()), (400, "bad_request"));
}

#[test]
fn the_deadline_header_is_capped_by_the_route() {
    let s = setup();
    let g = &s.gateway.addr;
    // flaky takes 400 ms: a 100 ms budget runs out, a 2 s one does not.
    let a = post(g, "/flaky/x", &[("x-axle-timeout-ms", "100")], "{}");
    assert_eq!(
        (a.status, a.error_class().as_str()),
        (504, "deadline_exceeded")
    );
    let a = post(g, "/flaky/x", &[("x-axle-timeout-ms", "2000")], "{}");
    assert_eq!(a.status, 200, "{a:?}");
    // The route caps any budget at 100 ms.
    let started = Instant::now();
    let a = post(g, "/slow/1", &[("x-axle-timeout-ms", "5000")], "{}");
    assert_eq!(a.status, 504, "{a:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "capped");
}

#[test]
fn tag_headers_reach_the_router() {
    let s = setup();
    let g = &s.gateway.addr;
    // The one endpoint carries no lane; the strict tag router keeps a request in its lane.
    let a = post(g, "/echo/say", &[("x-axle-tag-lane", "blue")], "{}");
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(a.error_class(), "no_endpoint");
    let a = post(g, "/echo/say", &[("x-axle-tag-zone", "a")], "{}");
    assert_eq!(a.status, 200, "a tag the router does not key on: {a:?}");
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let s = setup();
    let mut stream = std::net::TcpStream::connect(&s.gateway.addr).unwrap();
    stream
        .write_all(b"POST /echo/say HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    // The gateway closes the connection (header-read-timeout-ms = 300) long before the
    // read timeout: end of stream, or a reset.
    let _ = stream.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "still open after {:?}",
        started.elapsed()
    );
    // Other clients are served meanwhile and after.
    assert_eq!(post(&s.gateway.addr, "/echo/a", &[], "{}").status, 200);
}

#[test]
fn the_gateway_stops_on_sigterm() {
    let mut s = setup();
    assert_eq!(post(&s.gateway.addr, "/echo/a", &[], "1").status, 200);
    let status = s.gateway.terminate(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn http2_with_prior_knowledge_is_served() {
    use http_body_util::BodyExt;
    let s = setup();
    let rt = axle_host_tests::rt();
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(&s.gateway.addr)
            .await
            .unwrap();
        let (mut sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .expect("an HTTP/2 handshake");
        tokio::spawn(conn);
        let request = http::Request::post(format!("http://{}/echo/say", s.gateway.addr))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                br#"{"over": "h2"}"#,
            )))
            .unwrap();
        let answer = sender.send_request(request).await.unwrap();
        assert_eq!(answer.version(), http::Version::HTTP_2);
        assert_eq!(answer.status(), 200);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json, serde_json::json!({"over": "h2"}));
    });
}

#[test]
fn the_limiter_keys_on_the_http_client_and_answers_429_with_retry_after() {
    let provider = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = manifest(dir.path(), &provider.addr);
    let text = std::fs::read_to_string(&path).unwrap();
    let tight = text.replacen("rate = 1000000\nburst = 100000", "rate = 1\nburst = 3", 1);
    assert_ne!(
        tight, text,
        "the embedded limiter's defaults are in the manifest"
    );
    std::fs::write(&path, tight).unwrap();
    let gateway = AxleProcess::start(&[
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--manifest",
        path.to_str().unwrap(),
    ]);
    let answers: Vec<_> = (0..10)
        .map(|_| post(&gateway.addr, "/echo/say", &[], "{}"))
        .collect();
    let ok = answers.iter().filter(|a| a.status == 200).count();
    let limited: Vec<_> = answers.iter().filter(|a| a.status == 429).collect();
    assert!(ok >= 3, "the burst passes: {answers:?}");
    assert!(
        limited.len() >= 3,
        "then the client is limited: {answers:?}"
    );
    assert_eq!(ok + limited.len(), 10, "{answers:?}");
    let a = limited[0];
    assert_eq!(a.error_class(), "rate_limited");
    let retry_after: u64 = a
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "{a:?}");
}
