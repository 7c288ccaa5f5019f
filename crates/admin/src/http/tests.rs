//! HTTP on the admin listener, next to the frame protocol on the same port.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{request, Admin, Exposure, Token};
use axle_server::ServerBuilder;

/// One HTTP/1.1 exchange on a fresh connection: (status, body).
async fn http(addr: &str, head: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    (status, body.unwrap_or_default())
}

#[tokio::test]
async fn http_and_frames_share_the_port() {
    let server = ServerBuilder::new().bind("127.0.0.1:0").await.unwrap();
    let admin = Admin::new()
        .server("provider", &server)
        .token(Some(Token::new("t0k").unwrap()))
        .bind("127.0.0.1:0", Exposure::LoopbackOnly)
        .await
        .unwrap();
    let addr = admin.local_addr().to_string();

    assert_eq!(http(&addr, "GET /healthz HTTP/1.1", "").await.0, 200);
    assert_eq!(http(&addr, "GET /readyz HTTP/1.1", "").await.0, 503);
    admin.set_ready(true);
    assert_eq!(
        http(&addr, "GET /readyz HTTP/1.1", "").await,
        (200, "ready\n".into())
    );

    // The same method over both protocols.
    let (status, body) = http(&addr, "GET /stats HTTP/1.1", "").await;
    assert_eq!(status, 200);
    let over_http: Value = serde_json::from_str(&body).unwrap();
    let over_frames = request(&addr, "stats", &Value::Null, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(over_http["servers"][0]["name"], "provider");
    assert_eq!(
        over_http["servers"][0]["address"],
        over_frames["servers"][0]["address"]
    );

    let (status, body) = http(&addr, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("# TYPE axle_server_connections gauge"),
        "{body}"
    );
    assert!(
        body.contains("axle_server_connections{server=\"provider\"} 0"),
        "{body}"
    );

    // The dashboard and its assets; the events it reads.
    let (status, page) = http(&addr, "GET / HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(page.contains("<script src=\"dashboard.js\">"), "{page}");
    assert!(
        page.contains("data-swap=\"off\""),
        "a token but no swapper: no swap control"
    );
    assert_eq!(http(&addr, "GET /dashboard.js HTTP/1.1", "").await.0, 200);
    assert_eq!(http(&addr, "POST / HTTP/1.1", "").await.0, 405);
    events_route_answers_the_ring(&addr).await;

    // Wrong routes, wrong methods, no token, a wrong one; a token but no swapper.
    let (status, body) = http(&addr, "GET /nope HTTP/1.1", "").await;
    assert_eq!(status, 404);
    assert!(body.contains("GET /metrics"), "{body}");
    assert_eq!(http(&addr, "DELETE /stats HTTP/1.1", "").await.0, 405);
    assert_eq!(http(&addr, "POST /swap HTTP/1.1", "{}").await.0, 401);
    let wrong = "POST /swap HTTP/1.1\r\nAuthorization: Bearer nope";
    assert_eq!(http(&addr, wrong, "{}").await.0, 403);
    let right = "POST /swap HTTP/1.1\r\nAuthorization: Bearer t0k";
    let (status, body) = http(&addr, right, "{not json").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = http(&addr, right, "{}").await;
    assert_eq!(status, 404, "this admin offers no swap: {body}");

    // Garbage that is neither protocol gets HTTP's refusal, and the port keeps serving.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"\x16\x03\x01 not a request\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 400"), "{out}");
    assert_eq!(http(&addr, "GET /healthz HTTP/1.1", "").await.0, 200);

    admin.shutdown(Duration::from_millis(50)).await;
    server.shutdown(Duration::from_millis(50)).await;
}

/// `/events` answers the ring's page; a bad `since` is a 400 naming it.
async fn events_route_answers_the_ring(addr: &str) {
    let (status, body) = http(addr, "GET /events HTTP/1.1", "").await;
    assert_eq!(status, 200, "{body}");
    let page: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(page["next"], 0, "{page}");
    assert_eq!(page["events"], serde_json::json!([]));
    let (status, body) = http(addr, "GET /events?since=7 HTTP/1.1", "").await;
    assert_eq!(
        (status, body.contains("\"missed\": 0")),
        (200, true),
        "{body}"
    );
    let (status, body) = http(addr, "GET /events?since=-1 HTTP/1.1", "").await;
    assert_eq!(status, 400);
    assert!(body.contains("since=-1"), "{body}");
}

#[tokio::test]
async fn without_a_token_swaps_over_http_are_refused_with_the_way_to_configure_one() {
    let admin = Admin::new()
        .bind("127.0.0.1:0", Exposure::LoopbackOnly)
        .await
        .unwrap();
    let addr = admin.local_addr().to_string();
    let (status, body) = http(
        &addr,
        "POST /swap HTTP/1.1\r\nAuthorization: Bearer x",
        "{}",
    )
    .await;
    assert_eq!(status, 403);
    assert!(body.contains("--admin-token-file"), "{body}");
    assert!(body.contains("AXLE_ADMIN_TOKEN"), "{body}");
    admin.shutdown(Duration::from_millis(50)).await;
}
