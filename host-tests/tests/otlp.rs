//! OTLP export (issue 16): a real `axle serve` and a real `axle call`, both given
//! `--otlp-endpoint`, POST their spans to a tiny collector this test runs on loopback; the
//! caller's `call` and `attempt` spans and the provider's `handler` span form one trace.
//! The binary must be built with `--features etcd,otel` (scripts/test does); without the
//! feature `axle` refuses the flag and these tests say how to build it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axle_host_tests::etcd::wait_until;
use axle_host_tests::{axle_bin, ServeProcess};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

/// One exported span, flattened out of its request.
#[derive(Clone, Debug)]
struct Seen {
    service_name: String,
    name: String,
    kind: u64,
    trace_id: String,
    span_id: String,
    parent: Option<String>,
    attributes: BTreeMap<String, String>,
    start: u128,
    end: u128,
}

/// Every POST the collector received: path, content type, spans.
type Received = Arc<Mutex<Vec<(String, String, Vec<Seen>)>>>;

/// Reads one HTTP/1.1 request: (path, content type, body).
fn read_request(stream: &TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split(' ').nth(1)?.to_string();
    let (mut length, mut content_type) = (0, String::new());
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "content-type" => content_type = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, content_type, body))
}

fn spans_of(body: &Value) -> Vec<Seen> {
    let mut out = Vec::new();
    for resource in body["resourceSpans"].as_array().into_iter().flatten() {
        let service_name = resource["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "service.name")
            .and_then(|a| a["value"]["stringValue"].as_str())
            .unwrap_or_default()
            .to_string();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for s in scope["spans"].as_array().into_iter().flatten() {
                let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
                let attributes = s["attributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        let v = &a["value"];
                        let v = v["stringValue"].as_str().or(v["intValue"].as_str());
                        (text_of(&a["key"]), v.unwrap_or_default().to_string())
                    })
                    .collect();
                out.push(Seen {
                    service_name: service_name.clone(),
                    name: text("name"),
                    kind: s["kind"].as_u64().unwrap_or(0),
                    trace_id: text("traceId"),
                    span_id: text("spanId"),
                    parent: s["parentSpanId"].as_str().map(str::to_string),
                    attributes,
                    start: text("startTimeUnixNano").parse().unwrap_or(0),
                    end: text("endTimeUnixNano").parse().unwrap_or(0),
                });
            }
        }
    }
    out
}

fn text_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A collector on 127.0.0.1:0 answering every request `200 {}`; its URL and what it got.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let store = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(WAIT));
            let Some((path, content_type, body)) = read_request(&stream) else {
                continue;
            };
            let spans = serde_json::from_slice(&body)
                .map(|b: Value| spans_of(&b))
                .unwrap_or_default();
            store.lock().unwrap().push((path, content_type, spans));
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (url, received)
}

/// `axle ARGS...` to completion; a binary without the feature is named as the cause.
fn axle(args: &[&str]) -> Output {
    let out = Command::new(axle_bin()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("without the `otel` feature"),
        "target/release/axle lacks OTLP export: `cargo build --release -p axle-cli --features etcd,otel` (scripts/test does)"
    );
    out
}

fn all_spans(received: &Received) -> Vec<Seen> {
    let got = received.lock().unwrap();
    got.iter().flat_map(|(_, _, s)| s.clone()).collect()
}

#[test]
fn a_callers_call_and_attempt_and_the_providers_handler_are_one_exported_trace() {
    let (url, received) = collector();
    // Said plainly here, before `axle serve` refuses the flag in a less obvious place.
    axle(&["--otlp-endpoint", &url, "config", "schema"]);
    let serve = ServeProcess::start(&["--otlp-endpoint", &url, "--otlp-service-name", "provider"]);
    let out = axle(&[
        "call",
        "--endpoint",
        &serve.addr,
        "--otlp-endpoint",
        &url,
        "--otlp-service-name",
        "caller",
        "echo/say",
        r#"{"hi":1}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let find = |service: &str, name: &str| {
        all_spans(&received)
            .into_iter()
            .find(|s| s.service_name == service && s.name == name)
    };
    let arrived = wait_until(WAIT, || {
        find("caller", "call").is_some()
            && find("caller", "attempt").is_some()
            && find("provider", "handler").is_some()
    });
    assert!(
        arrived.is_some(),
        "spans received: {:#?}",
        all_spans(&received)
    );
    for (path, content_type, _) in received.lock().unwrap().iter() {
        assert_eq!(
            (path.as_str(), content_type.as_str()),
            ("/v1/traces", "application/json")
        );
    }
    let call = find("caller", "call").unwrap();
    let attempt = find("caller", "attempt").unwrap();
    let handler = find("provider", "handler").unwrap();

    assert_eq!(call.trace_id.len(), 32, "{call:?}");
    assert_eq!(attempt.trace_id, call.trace_id);
    assert_eq!(handler.trace_id, call.trace_id, "one trace across the hop");
    assert_eq!(
        call.parent, None,
        "a call with no trace handed in is a root"
    );
    assert_eq!(attempt.parent.as_ref(), Some(&call.span_id));
    assert_eq!(handler.parent.as_ref(), Some(&attempt.span_id));
    assert_eq!((call.kind, attempt.kind, handler.kind), (1, 3, 2));
    for s in [&call, &attempt, &handler] {
        assert_eq!(s.span_id.len(), 16, "{s:?}");
        assert_eq!(
            s.attributes.get("service").map(String::as_str),
            Some("echo"),
            "{s:?}"
        );
        assert_eq!(
            s.attributes.get("method").map(String::as_str),
            Some("say"),
            "{s:?}"
        );
        assert!(0 < s.start && s.start <= s.end, "{s:?}");
    }
    assert_eq!(
        attempt.attributes.get("attempt").map(String::as_str),
        Some("1")
    );
    assert_eq!(attempt.attributes.get("endpoint"), Some(&serve.addr));
    assert!(call.start <= attempt.start && attempt.end <= call.end);
}

#[test]
fn an_unreachable_collector_costs_one_warning_and_never_the_call() {
    // Bound then closed: nothing listens there.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let serve = ServeProcess::start(&[]);
    let url = format!("http://{dead}");
    let out = axle(&[
        "call",
        "--endpoint",
        &serve.addr,
        "--otlp-endpoint",
        &url,
        "echo/say",
        "{}",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("OTLP export to").count(), 1, "{stderr}");
    assert!(stderr.contains("spans were dropped"), "{stderr}");
}

#[test]
fn a_bad_endpoint_is_refused_before_anything_runs() {
    let out = axle(&[
        "call",
        "--otlp-endpoint",
        "https://127.0.0.1:4318",
        "echo/say",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("https is not supported"));
}
