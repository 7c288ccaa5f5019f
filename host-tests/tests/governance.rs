//! Governance with real processes: retries, failover, budgets, breakers, hedging,
//! fallback, the provider's guard, fuse and internal-only. Assertions are on counts and
//! states; the one latency comparison (hedging) has margins of several times.

use std::time::{Duration, Instant};

use axle::client::{CallError, CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle::wire::ErrorClass;
use axle_host_tests::{
    calls_at, governed_client, manifest_with_governance, rt, ServeProcess, TestHost,
};
use bytes::Bytes;

fn at(servers: &[&ServeProcess]) -> Vec<EndpointSpec> {
    servers.iter().map(|s| EndpointSpec::new(&s.addr)).collect()
}

async fn call(client: &Client, options: &CallOptions) -> Result<axle::client::Reply, CallError> {
    client
        .call_raw("flaky", "x", Bytes::from_static(b"ping"), options)
        .await
}

#[test]
fn idempotent_calls_survive_an_endpoint_failing_30_percent() {
    let (a, b) = (ServeProcess::start(&[]), ServeProcess::start(&[]));
    let bad = ServeProcess::start(&["--flaky-fail-rate", "0.3"]);
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&a, &b, &bad]),
        "idempotent = true\nretries = 2",
    );
    let n = 3000;
    let ok = rt().block_on(async {
        let mut ok = 0;
        for _ in 0..n {
            ok += usize::from(call(&client, &CallOptions::default()).await.is_ok());
        }
        ok
    });
    assert!(ok * 1000 >= n * 999, "{ok} of {n} succeeded");
}

#[test]
fn a_non_idempotent_call_is_not_retried_once_it_may_have_run() {
    let failing = ServeProcess::start(&["--flaky-fail-rate", "1"]);
    let healthy = ServeProcess::start(&[]);
    let t = TestHost::new();
    let mut endpoints = at(&[&failing, &healthy]);
    // A dead endpoint: refused connections never carried the request, so failing over
    // from it is safe even for a non-idempotent method.
    endpoints.push(EndpointSpec::new("127.0.0.1:1"));
    let client = governed_client(
        &t.host,
        "flaky",
        endpoints,
        "idempotent = false\nretries = 3\nbreaker = false",
    );
    let n = 90;
    let failures = rt().block_on(async {
        let mut failures = 0;
        for _ in 0..n {
            match call(&client, &CallOptions::default()).await {
                Ok(_) => {}
                Err(CallError::Remote {
                    class: ErrorClass::Internal,
                    ..
                }) => failures += 1,
                Err(other) => panic!("unexpected {other}"),
            }
        }
        failures
    });
    let (on_failing, on_healthy) = (
        calls_at(&client, &failing.addr),
        calls_at(&client, &healthy.addr),
    );
    assert_eq!(
        failures, on_failing,
        "every attempt on the failing endpoint was final"
    );
    assert_eq!(
        on_failing + on_healthy,
        n,
        "each call reached exactly one live endpoint"
    );
}

#[test]
fn no_call_overruns_its_deadline_however_many_retries() {
    let slow = ServeProcess::start(&[
        "--flaky-latency-ms",
        "60",
        "--flaky-jitter-ms",
        "60",
        "--flaky-fail-rate",
        "0.5",
    ]);
    let other = ServeProcess::start(&[
        "--flaky-latency-ms",
        "60",
        "--flaky-jitter-ms",
        "60",
        "--flaky-fail-rate",
        "0.5",
    ]);
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&slow, &other]),
        "idempotent = true\nretries = 10\nretry-interval-ms = 10\ntimeout-ms = 300\nbreaker = false\nretry-budget-min-per-s = 1000",
    );
    // Wide: CI runs this beside other tests on two cores; the point is "bounded by the
    // deadline", not a tight latency.
    let margin = Duration::from_millis(150);
    let over = rt().block_on(async {
        let mut over = Vec::new();
        for _ in 0..30 {
            let t0 = Instant::now();
            let _ = call(&client, &CallOptions::default()).await;
            let took = t0.elapsed();
            if took > Duration::from_millis(300) + margin {
                over.push(took);
            }
        }
        over
    });
    assert!(over.is_empty(), "calls past deadline + margin: {over:?}");
}

#[test]
fn with_every_endpoint_failing_the_retry_budget_holds_attempts_to_1_25x() {
    let servers: Vec<ServeProcess> = (0..3)
        .map(|_| ServeProcess::start(&["--flaky-fail-rate", "1"]))
        .collect();
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&servers.iter().collect::<Vec<_>>()),
        "idempotent = true\nretries = 3\nbreaker = false\nretry-budget-ratio = 0.2\nretry-budget-min-per-s = 0",
    );
    let n = 300u64;
    rt().block_on(async {
        for _ in 0..n {
            assert!(call(&client, &CallOptions::default()).await.is_err());
        }
    });
    let attempts: u64 = client.endpoints().iter().map(|v| v.calls).sum();
    assert!(attempts >= n, "{attempts}");
    assert!(
        attempts * 100 <= n * 125,
        "{attempts} attempts for {n} requests"
    );
}

#[test]
fn a_tripped_breaker_sends_nothing_until_half_open() {
    let failing = ServeProcess::start(&["--flaky-fail-rate", "1"]);
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&failing]),
        "retries = 0\nbreaker-consecutive-failures = 5\nbreak-ms = 1500\nhalf-open-probes = 1",
    );
    rt().block_on(async {
        for _ in 0..5 {
            assert!(matches!(
                call(&client, &CallOptions::default()).await,
                Err(CallError::Remote { .. })
            ));
        }
        let sent = calls_at(&client, &failing.addr);
        assert_eq!(sent, 5);
        for _ in 0..50 {
            let err = call(&client, &CallOptions::default()).await.unwrap_err();
            assert_eq!(err.class(), "breaker_open", "{err}");
        }
        assert_eq!(
            calls_at(&client, &failing.addr),
            sent,
            "nothing sent while open"
        );
        tokio::time::sleep(Duration::from_millis(1700)).await;
        // Half-open: one probe goes through (and fails, opening it again).
        assert!(matches!(
            call(&client, &CallOptions::default()).await,
            Err(CallError::Remote { .. })
        ));
        assert_eq!(calls_at(&client, &failing.addr), sent + 1);
        assert_eq!(
            call(&client, &CallOptions::default())
                .await
                .unwrap_err()
                .class(),
            "breaker_open"
        );
    });
}

#[test]
fn an_overloaded_providers_requests_complete_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let guarded = manifest_with_governance(dir.path(), "max-concurrent = 1");
    let busy = ServeProcess::start_with_manifest(Some(&guarded), &["--flaky-latency-ms", "100"]);
    let spare = ServeProcess::start(&["--flaky-latency-ms", "100"]);
    let t = TestHost::new();
    // Not idempotent: failover on `overloaded` must still happen (the handler did not run).
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&busy, &spare]),
        "idempotent = false\nretries = 0\nbreaker = false",
    );
    let results = rt().block_on(async {
        let calls = (0..20).map(|_| {
            let client = client.clone();
            tokio::spawn(async move { call(&client, &CallOptions::default()).await.is_ok() })
        });
        let mut out = Vec::new();
        for c in calls.collect::<Vec<_>>() {
            out.push(c.await.unwrap());
        }
        out
    });
    assert_eq!(
        results.iter().filter(|ok| **ok).count(),
        20,
        "every call completed"
    );
    assert!(
        calls_at(&client, &spare.addr) > 10,
        "the spare took the overflow"
    );
}

#[test]
fn hedging_cuts_the_slow_tail() {
    let a = ServeProcess::start(&[
        "--flaky-latency-ms",
        "1",
        "--flaky-slow-rate",
        "0.05",
        "--flaky-slow-ms",
        "400",
    ]);
    let b = ServeProcess::start(&[
        "--flaky-latency-ms",
        "1",
        "--flaky-slow-rate",
        "0.05",
        "--flaky-slow-ms",
        "400",
    ]);
    let t = TestHost::new();
    let plain = governed_client(
        &t.host,
        "flaky",
        at(&[&a, &b]),
        "idempotent = true\ntimeout-ms = 2000",
    );
    let hedged = governed_client(
        &t.host,
        "flaky",
        at(&[&a, &b]),
        "idempotent = true\ntimeout-ms = 2000\nhedge-delay-ms = 30\nretry-budget-ratio = 1.0",
    );
    // Counted, not timed: a call is slow when it waited for a 400 ms tail. Unhedged, 5%
    // of calls are (15 of 300 expected); hedged, a call is slow only when both its first
    // attempt and its backup are (0.25%: under 1 expected). The bounds below fail by
    // chance about once in ten thousand runs, whatever the machine's speed.
    let slow_calls = |client: &Client| {
        rt().block_on(async {
            let mut slow = 0;
            for _ in 0..300 {
                let t0 = Instant::now();
                call(client, &CallOptions::default()).await.unwrap();
                if t0.elapsed() >= Duration::from_millis(350) {
                    slow += 1;
                }
            }
            slow
        })
    };
    let (plain, hedged) = (slow_calls(&plain), slow_calls(&hedged));
    assert!(plain >= 4, "5% of calls are slow: {plain} of 300");
    assert!(
        hedged <= 5,
        "hedged: {hedged} slow calls of 300, unhedged {plain}"
    );
}

#[test]
fn a_fallback_answers_when_the_call_finally_fails_and_says_so() {
    let echo = ServeProcess::start(&[]);
    let t = TestHost::new();
    let dead = vec![EndpointSpec::new("127.0.0.1:1")];
    let value = governed_client(
        &t.host,
        "flaky",
        dead.clone(),
        "fallback = { value = { cached = true } }",
    );
    let answer = rt().block_on(async {
        value
            .call_detailed::<_, serde_json::Value>(
                "flaky",
                "x",
                &serde_json::json!({"q": 1}),
                &CallOptions::default(),
            )
            .await
            .unwrap()
    });
    assert!(answer.fallback);
    assert_eq!(answer.value, serde_json::json!({"cached": true}));

    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    m.service_governance.insert(
        "flaky".into(),
        toml::from_str("fallback = { call = \"echo/backup\" }").unwrap(),
    );
    let config = axle::client::ClientConfig::new(m)
        .endpoints("flaky", dead)
        .endpoints("echo", [EndpointSpec::new(&echo.addr)]);
    let client = Client::new(&t.host, config).unwrap();
    let answer = rt().block_on(async {
        client
            .call_detailed::<_, serde_json::Value>(
                "flaky",
                "x",
                &serde_json::json!({"q": 2}),
                &CallOptions::default(),
            )
            .await
            .unwrap()
    });
    assert!(answer.fallback, "the other method answered");
    assert_eq!(answer.value, serde_json::json!({"q": 2}));
    // Without the fallback the failure shows.
    let options = CallOptions {
        fallback: false,
        ..CallOptions::default()
    };
    let err = rt().block_on(async {
        client
            .call_detailed::<_, serde_json::Value>("flaky", "x", &serde_json::json!({}), &options)
            .await
            .unwrap_err()
    });
    // The refused connect of the call before made the endpoint unreachable: health
    // took it out of rotation, so the call fails before dialling.
    assert_eq!(err.class(), "no_endpoint", "{err}");
    assert!(err.to_string().contains("reachable"), "{err}");
}

#[test]
fn the_provider_fuse_and_internal_only_methods() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest_with_governance(dir.path(), "fuse-errors = 3\nfuse-sleep-ms = 60000");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "idempotent = false     #",
        "internal-only = true\nidempotent = false     #",
    );
    std::fs::write(&manifest, &text).unwrap();
    // Loopback callers are internal here: `--trust` (nobody is, by default).
    let server = ServeProcess::start_with_manifest(
        Some(&manifest),
        &["--flaky-fail-rate", "1", "--trust", "127.0.0.1"],
    );
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&server]),
        "retries = 0\nbreaker = false",
    );
    let classes: Vec<String> = rt().block_on(async {
        let mut out = Vec::new();
        for _ in 0..6 {
            out.push(
                call(&client, &CallOptions::default())
                    .await
                    .unwrap_err()
                    .class()
                    .to_string(),
            );
        }
        out
    });
    assert_eq!(
        classes,
        [
            "internal",
            "internal",
            "internal",
            "overloaded",
            "overloaded",
            "overloaded"
        ]
    );

    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    let kv = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("kv", [EndpointSpec::new(&server.addr)]),
    )
    .unwrap();
    rt().block_on(async {
        let put = serde_json::json!({"key": "k", "value": 1});
        let outside = CallOptions {
            external: true,
            ..CallOptions::default()
        };
        let err = kv
            .call::<_, serde_json::Value>("kv", "put", &put, &outside)
            .await
            .unwrap_err();
        assert_eq!(err.class(), "forbidden", "{err}");
        kv.call::<_, serde_json::Value>("kv", "put", &put, &CallOptions::default())
            .await
            .unwrap();
        // get is not internal-only.
        kv.call::<_, serde_json::Value>("kv", "get", &serde_json::json!({"key": "k"}), &outside)
            .await
            .unwrap();
    });
}

#[test]
fn a_method_tier_can_choose_its_own_selector() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let t = TestHost::new();
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    // A weight-blind default slot (the embedded default, smooth-weighted, follows the
    // weights too), so what the method tier's choice changes shows.
    m.slots.selector = Some("round-robin".into());
    m.method_governance.insert(
        ("flaky".into(), "heavy".into()),
        toml::from_str("selector = \"weighted-random\"").unwrap(),
    );
    let weights = [1u32, 1, 998];
    let endpoints = servers.iter().zip(weights).map(|(s, w)| EndpointSpec {
        weight: w,
        ..EndpointSpec::new(&s.addr)
    });
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("flaky", endpoints),
    )
    .unwrap();
    let runtime = rt();
    // The service's slot (round-robin) ignores weights: exact thirds.
    runtime.block_on(async {
        for _ in 0..300 {
            client
                .call_raw("flaky", "even", Bytes::new(), &CallOptions::default())
                .await
                .unwrap();
        }
    });
    let even: Vec<u64> = servers.iter().map(|s| calls_at(&client, &s.addr)).collect();
    assert_eq!(even, [100, 100, 100]);
    // The method tier's weighted-random follows them.
    runtime.block_on(async {
        for _ in 0..300 {
            client
                .call_raw("flaky", "heavy", Bytes::new(), &CallOptions::default())
                .await
                .unwrap();
        }
    });
    let heavy = calls_at(&client, &servers[2].addr) - 100;
    assert!(
        heavy >= 280,
        "{heavy} of 300 went to the weight-998 endpoint"
    );
}
