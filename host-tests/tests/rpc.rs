//! RPC over real sockets between real `axle serve` processes and a client in this test:
//! distribution per selector, error classes, hostile peers, frame limits, multiplexing.

use std::io::{Read, Write};
use std::time::Duration;

use axle::client::{CallError, CallOptions, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::transport::TransportError;
use axle::wire::ErrorClass;
use axle_host_tests::{client_for, rt, ServeProcess, TestHost};
use bytes::Bytes;

fn three() -> Vec<ServeProcess> {
    (0..3).map(|_| ServeProcess::start(&[])).collect()
}

fn calls_by_address(client: &axle::client::Client) -> Vec<(String, u64)> {
    client
        .endpoints()
        .into_iter()
        .map(|v| (v.address, v.calls))
        .collect()
}

#[test]
fn round_robin_splits_calls_into_exact_thirds() {
    let servers = three();
    let t = TestHost::new();
    let client = client_for(
        &t.host,
        "echo",
        "round-robin",
        servers.iter().map(|s| EndpointSpec::new(&s.addr)).collect(),
    );
    rt().block_on(async {
        for i in 0..300u32 {
            let body = Bytes::from(i.to_be_bytes().to_vec());
            let reply = client
                .call_raw("echo", "say", body.clone(), &CallOptions::default())
                .await
                .unwrap();
            assert_eq!(reply.payload, body);
        }
    });
    let counts = calls_by_address(&client);
    assert_eq!(counts.len(), 3);
    for (addr, calls) in counts {
        assert_eq!(calls, 100, "{addr}");
    }
    // Every pick came from the wasm selector itself, none from the kernel's fallback: in
    // runs of four (`docs/strategies.md`, "Runs"), so a call per four picks.
    let stats = client.plugin_stats();
    let (_, rr) = stats.iter().find(|(n, _)| n == "round-robin").unwrap();
    assert!((300 / 4..300).contains(&rr.calls), "{rr:?}");
    assert_eq!(rr.faults(), 0, "{rr:?}");
}

#[test]
fn weighted_random_follows_the_endpoint_weights() {
    let servers = three();
    let t = TestHost::new();
    let weights = [100u32, 200, 700];
    let endpoints = servers
        .iter()
        .zip(weights)
        .map(|(s, w)| EndpointSpec {
            weight: w,
            ..EndpointSpec::new(&s.addr)
        })
        .collect();
    let client = client_for(&t.host, "echo", "weighted-random", endpoints);
    let n = 3000;
    rt().block_on(async {
        for _ in 0..n {
            client
                .call_raw(
                    "echo",
                    "say",
                    Bytes::from_static(b"x"),
                    &CallOptions::default(),
                )
                .await
                .unwrap();
        }
    });
    let counts = calls_by_address(&client);
    for ((_, calls), w) in counts.iter().zip(weights) {
        let share = *calls as f64 / n as f64;
        let expected = f64::from(w) / 1000.0;
        assert!(
            (share - expected).abs() < 0.04,
            "share {share:.3} vs weight {expected:.3}: {counts:?}"
        );
    }
}

#[test]
fn error_classes_arrive_intact() {
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    // A limiter of 2 requests, then one per 10 s, on this provider.
    let text = axle::manifest::defaults::EMBEDDED_MANIFEST
        .replace("rate = 1000000\nburst = 100000", "rate = 0.1\nburst = 2");
    assert_ne!(
        text,
        axle::manifest::defaults::EMBEDDED_MANIFEST,
        "the limit was rewritten"
    );
    std::fs::write(&manifest_path, text).unwrap();
    let limited = ServeProcess::start_with_manifest(Some(&manifest_path), &[]);
    let failing = ServeProcess::start(&["--flaky-fail-rate", "1"]);
    let slow = ServeProcess::start(&["--flaky-latency-ms", "2000"]);
    let t = TestHost::new();
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let config = ClientConfig::new(m)
        .endpoints("kv", [EndpointSpec::new(&limited.addr)])
        .endpoints("echo", [EndpointSpec::new(&limited.addr)])
        .endpoints("flaky", [EndpointSpec::new(&failing.addr)])
        .endpoints("nosuch", [EndpointSpec::new(&failing.addr)]);
    let client = axle::client::Client::new(&t.host, config).unwrap();
    let slow_client = client_for(
        &t.host,
        "flaky",
        "round-robin",
        vec![EndpointSpec::new(&slow.addr)],
    );
    let opts = CallOptions::default();
    let class = |r: Result<serde_json::Value, CallError>| match r {
        Err(CallError::Remote { class, .. }) => Some(class),
        Err(other) => panic!("expected a remote error, got {other}"),
        Ok(v) => panic!("expected an error, got {v}"),
    };
    rt().block_on(async {
        let missing = client
            .call::<_, serde_json::Value>("kv", "get", &serde_json::json!({"key": "nope"}), &opts)
            .await;
        assert_eq!(class(missing), Some(ErrorClass::Business));
        let shape = client
            .call::<_, serde_json::Value>("kv", "get", &serde_json::json!({"wrong": 1}), &opts)
            .await;
        assert_eq!(class(shape), Some(ErrorClass::BadRequest));
        // Buckets are per key (service, method, app, IP): echo/x gets 2, then is rate
        // limited with a retry-after of the refill time.
        for _ in 0..2 {
            client
                .call_raw("echo", "x", Bytes::new(), &opts)
                .await
                .unwrap();
        }
        match client.call_raw("echo", "x", Bytes::new(), &opts).await {
            Err(CallError::Remote {
                class,
                retry_after_ms,
                ..
            }) => {
                assert_eq!(class, ErrorClass::RateLimited);
                assert!(retry_after_ms.unwrap() > 1000, "{retry_after_ms:?}");
            }
            other => panic!("expected rate_limited, got {other:?}"),
        }
        let internal = client
            .call::<_, serde_json::Value>("flaky", "x", &serde_json::json!({}), &opts)
            .await;
        assert_eq!(class(internal), Some(ErrorClass::Internal));
        let not_found = client.call_raw("nosuch", "x", Bytes::new(), &opts).await;
        assert!(matches!(
            not_found,
            Err(CallError::Remote {
                class: ErrorClass::NotFound,
                ..
            })
        ));
        let late = slow_client
            .call_raw(
                "flaky",
                "x",
                Bytes::new(),
                &CallOptions::timeout(Duration::from_millis(100)),
            )
            .await
            .unwrap_err();
        // Whichever side notices first: the caller's deadline, or the provider running
        // the handler within the deadline that travelled with the request.
        assert_eq!(late.class(), "deadline_exceeded");
        assert!(
            matches!(
                late,
                CallError::Transport(TransportError::Timeout)
                    | CallError::Remote {
                        class: ErrorClass::DeadlineExceeded,
                        ..
                    }
            ),
            "{late:?}"
        );
    });
}

#[test]
fn a_peer_sending_garbage_is_disconnected_while_others_keep_working() {
    let server = ServeProcess::start(&[]);
    let t = TestHost::new();
    let client = client_for(
        &t.host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(&server.addr)],
    );
    let runtime = rt();
    runtime.block_on(async {
        client
            .call_raw(
                "echo",
                "a",
                Bytes::from_static(b"1"),
                &CallOptions::default(),
            )
            .await
            .unwrap();
    });
    let mut garbage = std::net::TcpStream::connect(&server.addr).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    garbage
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let n = garbage
        .read(&mut buf)
        .expect("the server closes, not hangs");
    assert_eq!(n, 0, "closed without an answer");
    // The well-behaved client's connection was never touched.
    runtime.block_on(async {
        for _ in 0..50 {
            client
                .call_raw(
                    "echo",
                    "a",
                    Bytes::from_static(b"2"),
                    &CallOptions::default(),
                )
                .await
                .unwrap();
        }
    });
    assert_eq!(client.endpoints()[0].calls, 51);
}

#[test]
fn max_frame_size_is_enforced_on_both_sides() {
    let server = ServeProcess::start(&["--max-frame-bytes", "65536"]);
    let t = TestHost::new();
    let runtime = rt();
    // The client's own limit: refused before anything is sent.
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let mut config = ClientConfig::new(m).endpoints("echo", [EndpointSpec::new(&server.addr)]);
    config.limits.max_frame = 1024;
    let small = axle::client::Client::new(&t.host, config).unwrap();
    runtime.block_on(async {
        let err = small
            .call_raw(
                "echo",
                "a",
                Bytes::from(vec![0u8; 4096]),
                &CallOptions::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, CallError::Transport(TransportError::Frame(_))),
            "{err}"
        );
        assert!(err.to_string().contains("exceeds the frame limit"), "{err}");
    });
    // The server's limit: a 100 KiB request closes that connection; a later call
    // reconnects and works.
    let client = client_for(
        &t.host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(&server.addr)],
    );
    runtime.block_on(async {
        let err = client
            .call_raw(
                "echo",
                "a",
                Bytes::from(vec![0u8; 100 << 10]),
                &CallOptions::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, CallError::Transport(TransportError::Reset { .. })),
            "{err}"
        );
        let ok = client
            .call_raw(
                "echo",
                "a",
                Bytes::from(vec![7u8; 60 << 10]),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(ok.payload.len(), 60 << 10);
    });
}

#[test]
fn hundreds_of_concurrent_calls_share_one_connection() {
    let server = ServeProcess::start(&["--flaky-jitter-ms", "20"]);
    let t = TestHost::new();
    let client = client_for(
        &t.host,
        "flaky",
        "round-robin",
        vec![EndpointSpec::new(&server.addr)],
    );
    let runtime = rt();
    let answers = runtime.block_on(async {
        let calls = (0..500u32).map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let body = Bytes::from(format!("request {i}"));
                let reply = client
                    .call_raw(
                        "flaky",
                        "x",
                        body.clone(),
                        &CallOptions::timeout(Duration::from_secs(10)),
                    )
                    .await
                    .unwrap();
                reply.payload == body
            })
        });
        futures_join(calls.collect()).await
    });
    assert_eq!(
        answers.iter().filter(|ok| **ok).count(),
        500,
        "every call got its own answer"
    );
    assert_eq!(client.endpoints()[0].calls, 500);
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<bool>>) -> Vec<bool> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[test]
fn a_peer_speaking_another_protocol_version_is_told_why_then_closed() {
    let server = ServeProcess::start(&[]);
    let mut peer = std::net::TcpStream::connect(&server.addr).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // A well-formed version-2 request header (magic, version 2, kind 1, no body).
    let mut frame = vec![0xA5, 0x1E, 2, 1, 0, 0];
    frame.extend_from_slice(&7u64.to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes());
    peer.write_all(&frame).unwrap();
    let mut answer = Vec::new();
    peer.read_to_end(&mut answer)
        .expect("the server answers, then closes");
    assert!(answer.len() > axle::wire::HEADER_LEN, "{answer:?}");
    assert_eq!(
        &answer[..4],
        &[0xA5, 0x1E, 1, 5],
        "a version-1 goaway frame"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("unsupported protocol version 2"), "{text}");
}
