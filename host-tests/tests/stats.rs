//! `axle stats` against real processes: a provider's counters read through its admin
//! endpoint (exact counts of requests, answers by class, most handled at once), and a
//! manifest's endpoints probed from here (one live, one dead). Counts and states only;
//! waiting for a state polls the admin endpoint, no assertion is on time.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle_host_tests::{axle_bin, governed_client, rt, text, ServeProcess, TestHost};
use bytes::Bytes;
use serde_json::Value;

fn axle(args: &[&str]) -> Output {
    Command::new(axle_bin())
        .args(args)
        .output()
        .expect("run axle")
}

/// `axle stats --admin ADDR --json`, parsed.
fn stats_json(admin: &str) -> Value {
    let out = axle(&["stats", "--admin", admin, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stats --json prints JSON")
}

/// The server view's row of `service/method` (`Value::Null` when it has none yet).
fn method<'a>(report: &'a Value, service: &str, method: &str) -> &'a Value {
    let servers = report["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 1, "{report}");
    servers[0]["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["service"] == service && m["method"] == method)
        .unwrap_or(&Value::Null)
}

fn admin_of(server: &ServeProcess) -> &str {
    server.admin.as_deref().expect("--admin prints its address")
}

/// No retries, no breaker: one call is one request at the provider.
fn one_request_per_call(t: &TestHost, service: &str, server: &ServeProcess) -> Client {
    governed_client(
        &t.host,
        service,
        vec![EndpointSpec::new(&server.addr)],
        "retries = 0\nbreaker = false\ntimeout-ms = 60000",
    )
}

#[test]
fn serve_admin_counts_every_request_and_every_error_class_exactly() {
    let server = ServeProcess::start(&["--flaky-fail-rate", "1", "--admin", "127.0.0.1:0"]);
    let t = TestHost::new();
    let echo = one_request_per_call(&t, "echo", &server);
    let flaky = one_request_per_call(&t, "flaky", &server);
    let (n, m) = (25, 7);
    rt().block_on(async {
        let options = CallOptions::default();
        for _ in 0..n {
            echo.call_raw("echo", "ping", Bytes::from_static(b"hi"), &options)
                .await
                .expect("echo answers");
        }
        for _ in 0..m {
            let failed = flaky
                .call_raw("flaky", "x", Bytes::from_static(b"hi"), &options)
                .await;
            assert!(failed.is_err(), "--flaky-fail-rate 1 fails every call");
        }
    });

    // `echo` and `flaky` serve every name with one handler, and the manifest declares
    // none of these: each service counts them on its one shared `*` row.
    let report = stats_json(admin_of(&server));
    let ping = method(&report, "echo", "*");
    assert_eq!(ping["requests"], n, "{ping}");
    assert_eq!(ping["handled"], n, "{ping}");
    assert_eq!(ping["ok"], n, "{ping}");
    assert_eq!(ping["errors"], serde_json::json!({}), "{ping}");
    assert_eq!(ping["in_flight"], 0, "{ping}");
    let x = method(&report, "flaky", "*");
    assert_eq!(x["handled"], m, "{x}");
    assert_eq!(x["ok"], 0, "{x}");
    assert_eq!(x["errors"], serde_json::json!({ "internal": m }), "{x}");

    // The table says the same to people.
    let table = axle(&["stats", "--admin", admin_of(&server)]);
    let out = text(&table.stdout);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("flaky/* "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains(&format!("internal={m}")), "{row}");
    assert!(
        out.contains(&format!("server `serve` on {}", server.addr)),
        "{out}"
    );
}

#[test]
fn serve_admin_shows_the_most_requests_handled_at_once() {
    // Handlers that take far longer than the test: the calls are all in flight together
    // until the test ends, so waiting for them to be seen needs no timing assumption.
    let server = ServeProcess::start(&["--flaky-latency-ms", "60000", "--admin", "127.0.0.1:0"]);
    let t = TestHost::new();
    let client = one_request_per_call(&t, "flaky", &server);
    let concurrency: u64 = 6;
    let runtime = rt();
    let _calls: Vec<_> = (0..concurrency)
        .map(|_| {
            let client = client.clone();
            runtime.spawn(async move {
                let options = CallOptions::default();
                let _ = client
                    .call_raw("flaky", "slow", Bytes::from_static(b"hi"), &options)
                    .await;
            })
        })
        .collect();

    let give_up = Instant::now() + Duration::from_secs(30);
    let row = loop {
        let report = stats_json(admin_of(&server));
        let row = method(&report, "flaky", "*").clone();
        if row["in_flight"] == concurrency || Instant::now() > give_up {
            break row;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(row["in_flight"], concurrency, "{row}");
    assert_eq!(row["requests"], concurrency, "{row}");
    assert_eq!(row["handled"], 0, "none has finished: {row}");
    let max = row["max_concurrency_seen"].as_u64().expect("a count");
    assert!(max >= concurrency, "{row}");
    runtime.shutdown_background();
}

#[test]
fn stats_from_a_manifest_shows_a_live_endpoint_healthy_and_a_dead_one_dead() {
    let live = ServeProcess::start(&[]);
    // A port nobody listens on: bound, then let go.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = dir.path().join("plugins.toml");
    let toml = axle::manifest::defaults::EMBEDDED_MANIFEST.replace(
        "endpoints = [\"127.0.0.1:7300\"]",
        &format!("endpoints = [{:?}, {dead:?}]", live.addr),
    );
    std::fs::write(&manifest, toml).expect("write manifest");
    let path = manifest.to_str().expect("utf-8 path");

    let out = axle(&["stats", "--manifest", path, "--json", "--probe-ms", "500"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let services = report["clients"][0]["services"]
        .as_array()
        .expect("services");
    let echo = services
        .iter()
        .find(|s| s["service"] == "echo")
        .unwrap_or_else(|| panic!("{report}"));
    let state_of = |addr: &str| {
        let e = echo["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .find(|e| e["address"] == addr)
            .unwrap_or_else(|| panic!("{addr} in {echo}"));
        (e["state"].clone(), e["in_rotation"].clone())
    };
    assert_eq!(
        state_of(&live.addr),
        ("healthy".into(), true.into()),
        "{echo}"
    );
    assert_eq!(state_of(&dead), ("dead".into(), false.into()), "{echo}");
    // Every plugin of the client, with its counters (calls, faults by cause, quarantine).
    let plugins = report["clients"][0]["plugins"]
        .as_array()
        .unwrap_or_else(|| panic!("plugins in {report}"));
    // The embedded slots: smooth-weighted (the default selector), availability, json.
    for name in ["smooth-weighted", "availability", "json"] {
        let p = plugins
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {plugins:?}"));
        assert!(p["calls"].is_u64() && p["timeouts"] == 0, "{p}");
        assert_eq!(p["quarantined"], false, "{p}");
    }

    let table = axle(&["stats", "--manifest", path, "--probe-ms", "500"]);
    let out = text(&table.stdout);
    let row = |addr: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(addr))
            .unwrap_or_else(|| panic!("{addr} in {out}"))
            .to_string()
    };
    assert!(row(&live.addr).contains(" healthy "), "{out}");
    assert!(row(&dead).contains(" dead "), "{out}");
    assert!(
        out.contains("  plugins") && out.contains("availability"),
        "{out}"
    );
}

#[test]
fn the_admin_endpoint_stays_on_loopback_unless_told() {
    let out = axle(&["serve", "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--admin-public"), "{err}");
}
