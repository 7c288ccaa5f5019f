//! The caller's side of a provider's lifecycle, with real `axle serve` processes: what a
//! call holds is given back however it ends (a breaker never sticks after hedges,
//! timeouts and cancel frames), cluster-wide overload does not multiply the load by the
//! number of endpoints, and a rolling restart of manifest-listed providers (no registry)
//! fails no non-idempotent call. Assertions are on counts and states; waits are for
//! states, bounded, never for timings.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle_host_tests::{governed_client, manifest_with_governance, rt, ServeProcess, TestHost};
use bytes::Bytes;
use serde_json::Value;

fn at(servers: &[&ServeProcess]) -> Vec<EndpointSpec> {
    servers.iter().map(|s| EndpointSpec::new(&s.addr)).collect()
}

/// Waits until `done` holds; fails the test (naming `what`) after 30 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < give_up, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `axle stats --admin ADDR --json`: the row of `service/method` of its one server.
fn provider_row(admin: &str, service: &str, method: &str) -> Value {
    let report = axle_host_tests::admin_stats(admin);
    report["servers"][0]["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["service"] == service && m["method"] == method)
        .cloned()
        .unwrap_or(Value::Null)
}

fn admin_of(s: &ServeProcess) -> &str {
    s.admin.as_deref().expect("started with --admin")
}

fn breaker_of(client: &Client, service: &str) -> String {
    let view = client.services();
    let svc = view.iter().find(|s| s.service == service).expect("service");
    svc.policies.last().expect("the `*` policy").breaker.clone()
}

fn in_flight(client: &Client) -> u32 {
    client.endpoints().iter().map(|e| e.in_flight).sum()
}

fn calls(client: &Client) -> Vec<u64> {
    client.endpoints().iter().map(|e| e.calls).collect()
}

#[test]
fn a_breaker_never_sticks_after_hedges_timeouts_and_cancel_frames() {
    // Every request takes 300 ms: a call with less budget times out (its attempts are
    // cancelled with cancel frames), and a hedged call's backup goes out before either
    // answers, so one attempt of each call loses.
    let slow = ["--flaky-latency-ms", "300", "--admin", "127.0.0.1:0"];
    let (p1, p2) = (ServeProcess::start(&slow), ServeProcess::start(&slow));
    let t = TestHost::new();
    let client = governed_client(
        &t.host,
        "flaky",
        at(&[&p1, &p2]),
        "idempotent = true\nhedge-delay-ms = 20\ntimeout-ms = 3000\n\
         retry-budget-ratio = 1.0\nretry-budget-min-per-s = 1000\n\
         breaker-consecutive-failures = 3\nbreak-ms = 200\nhalf-open-probes = 2",
    );
    let call = |client: &Client, options: CallOptions| {
        let client = client.clone();
        async move {
            client
                .call_raw("flaky", "x", Bytes::from_static(b"ping"), &options)
                .await
        }
    };
    rt().block_on(async {
        // Timeouts (the caller's budget, 50 ms): the method's breaker and the endpoints'
        // open.
        for _ in 0..3 {
            let err = call(&client, CallOptions::timeout(Duration::from_millis(50)))
                .await
                .unwrap_err();
            assert_eq!(err.class(), "deadline_exceeded", "{err}");
        }
        assert_eq!(breaker_of(&client, "flaky"), "open");

        // Half-open: callers drop their calls while the probes are in flight (hedged, so
        // two attempts each), five times the number of probe slots.
        until("half-open", || breaker_of(&client, "flaky") == "half-open").await;
        let mut dropped = 0;
        let mut refused = Vec::new();
        while dropped < 10 {
            assert!(refused.len() < 200, "calls kept failing: {refused:?}");
            let task = tokio::spawn(call(&client, CallOptions::default()));
            until("in flight, or finished", || {
                in_flight(&client) > 0 || task.is_finished()
            })
            .await;
            if task.is_finished() {
                // An endpoint's breaker may still be open for a moment: try again.
                let outcome = task.await.unwrap();
                refused.push(
                    outcome
                        .map(|_| "ok".to_string())
                        .unwrap_or_else(|e| e.to_string()),
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
            dropped += 1;
            until("the dropped call's attempts counted out", || {
                in_flight(&client) == 0
            })
            .await;
        }
        assert!(
            !refused.iter().any(|e| e.contains("circuit open")),
            "a dropped probe kept its slot: {refused:?}"
        );

        // Answers in time again: the probes close the breaker, both endpoints take calls
        // (no endpoint breaker stuck either), and nothing is left in flight on either side.
        let before = calls(&client);
        let mut ok = 0;
        while breaker_of(&client, "flaky") != "closed" || ok < 10 {
            assert!(
                ok < 50,
                "the breaker stayed {}",
                breaker_of(&client, "flaky")
            );
            call(&client, CallOptions::default()).await.unwrap();
            ok += 1;
        }
        let after = calls(&client);
        assert!(
            before.iter().zip(&after).all(|(b, a)| a > b),
            "both endpoints answered: {before:?} → {after:?}"
        );
        until("nothing in flight at the caller", || {
            in_flight(&client) == 0
        })
        .await;
    });
    for p in [&p1, &p2] {
        let give_up = Instant::now() + Duration::from_secs(30);
        let row = loop {
            let row = provider_row(admin_of(p), "flaky", "*");
            if row["in_flight"] == 0 || Instant::now() > give_up {
                break row;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            row["in_flight"], 0,
            "the provider's handlers were freed: {row}"
        );
        let answered = row["ok"].as_u64().unwrap() + axle_error_count(&row);
        eprintln!(
            "provider {}: {} requests, {answered} answered, the rest cancelled",
            p.addr, row["requests"]
        );
        assert!(
            row["requests"].as_u64().unwrap() > answered,
            "cancel frames reached it: {row}"
        );
    }
}

fn axle_error_count(row: &Value) -> u64 {
    row["errors"]
        .as_object()
        .map_or(0, |e| e.values().filter_map(Value::as_u64).sum())
}

#[test]
fn every_provider_overloaded_attempts_per_call_stay_bounded() {
    // Each provider's fuse blows at its first `internal` error and then answers every
    // request `overloaded` (for ten minutes): the whole cluster refuses.
    let dir = tempfile::tempdir().unwrap();
    let fused = manifest_with_governance(dir.path(), "fuse-errors = 1\nfuse-sleep-ms = 600000");
    let args = ["--flaky-fail-rate", "1", "--admin", "127.0.0.1:0"];
    let providers: Vec<ServeProcess> = (0..5)
        .map(|_| ServeProcess::start_with_manifest(Some(&fused), &args))
        .collect();
    let t = TestHost::new();
    let runtime = rt();
    for p in &providers {
        let one = governed_client(&t.host, "flaky", at(&[p]), "retries = 0\nbreaker = false");
        let classes: Vec<String> = runtime.block_on(async {
            let mut out = Vec::new();
            for _ in 0..2 {
                let r = one
                    .call_raw("flaky", "x", Bytes::new(), &CallOptions::default())
                    .await;
                out.push(r.unwrap_err().class().to_string());
            }
            out
        });
        assert_eq!(classes, ["internal", "overloaded"], "the fuse blew");
    }
    let requests = |providers: &[ServeProcess]| -> u64 {
        providers
            .iter()
            .map(|p| {
                provider_row(admin_of(p), "flaky", "*")["requests"]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    let before = requests(&providers);
    // The default governance: not idempotent, `max-failovers` 2, a retry budget of 20% of
    // requests plus 10 a second.
    let all: Vec<&ServeProcess> = providers.iter().collect();
    let client = governed_client(&t.host, "flaky", at(&all), "");
    let n = 300u64;
    let started = Instant::now();
    runtime.block_on(async {
        for _ in 0..n {
            let err = client
                .call_raw("flaky", "x", Bytes::new(), &CallOptions::default())
                .await
                .unwrap_err();
            assert_eq!(err.class(), "overloaded", "{err}");
        }
    });
    let secs = started.elapsed().as_secs() + 1;
    let attempts = requests(&providers) - before;
    eprintln!(
        "{n} calls against 5 overloaded providers: {attempts} attempts ({:.2} per call) in {:?}",
        attempts as f64 / n as f64,
        started.elapsed()
    );
    assert!(attempts >= n, "{attempts}");
    assert!(attempts <= 3 * n, "max-failovers: {attempts} for {n} calls");
    // The budget: 20% of the calls, plus its floor (10 saved up, 10 more a second).
    let budget = n / 5 + 10 + 10 * secs;
    assert!(
        attempts <= n + budget,
        "{attempts} attempts for {n} calls in {secs} s (budget {budget})"
    );
}

/// Calls made and failed by a [`Load`], by error class.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
    errors: std::sync::Mutex<Vec<String>>,
}

/// `workers` tasks making non-idempotent `kv/put` calls in a loop until stopped (at most
/// `max` in all).
struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(client: &Client, workers: usize, max: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let tasks = (0..workers)
            .map(|w| {
                let (client, stop, counts) = (client.clone(), stop.clone(), counts.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Relaxed)
                        && counts.ok.load(Relaxed) + counts.failed.load(Relaxed) < max
                    {
                        i += 1;
                        let put = serde_json::json!({"key": format!("w{w}"), "value": i});
                        let r = client
                            .call::<_, Value>("kv", "put", &put, &CallOptions::default())
                            .await;
                        match r {
                            Ok(_) => counts.ok.fetch_add(1, Relaxed),
                            Err(e) => {
                                counts
                                    .errors
                                    .lock()
                                    .unwrap()
                                    .push(format!("{}: {e}", e.class()));
                                counts.failed.fetch_add(1, Relaxed)
                            }
                        };
                    }
                })
            })
            .collect();
        Load {
            stop,
            counts,
            tasks,
        }
    }

    fn total(&self) -> u64 {
        self.counts.ok.load(Relaxed) + self.counts.failed.load(Relaxed)
    }

    async fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Relaxed);
        for t in self.tasks {
            t.await.expect("a calling task panicked");
        }
        let errors = std::mem::take(&mut *self.counts.errors.lock().unwrap());
        (
            self.counts.ok.load(Relaxed),
            self.counts.failed.load(Relaxed),
            errors,
        )
    }
}

#[test]
fn a_rolling_restart_of_manifest_listed_providers_fails_no_non_idempotent_call() {
    let mut providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let addrs: Vec<String> = providers.iter().map(|p| p.addr.clone()).collect();
    // The manifest lists the providers (no registry); `kv/put` is not idempotent in it,
    // so a call is never sent twice once it may have run.
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    m.endpoints
        .insert("kv".into(), addrs.iter().map(EndpointSpec::new).collect());
    let t = TestHost::new();
    let client = Client::new(&t.host, axle::client::ClientConfig::new(m)).unwrap();
    assert!(!client.manifest().governance("kv", "put").idempotent);
    let in_rotation = |addr: &str| {
        client
            .endpoints()
            .iter()
            .any(|e| e.address == addr && e.in_rotation)
    };
    let calls_at = |addr: &str| {
        client
            .endpoints()
            .iter()
            .find(|e| e.address == addr)
            .map_or(0, |e| e.calls)
    };
    let runtime = rt();
    let (ok, failed, errors, took) = runtime.block_on(async {
        let load = Load::start(&client, 8, 1_000_000);
        let t0 = Instant::now();
        until("calls flowing", || load.total() >= 500).await;
        for (i, addr) in addrs.iter().enumerate() {
            providers[i].terminate();
            // Blocking this thread is fine: the calls run on the runtime's workers.
            let exited = providers[i].wait_exit(Duration::from_secs(30));
            assert!(exited.is_some(), "provider {addr} did not stop");
            providers[i] = ServeProcess::start_at(addr, &[]);
            let restarted = Instant::now();
            until("the restarted provider back in rotation", || {
                in_rotation(addr) && client.admissible("kv") == 3
            })
            .await;
            let back = restarted.elapsed();
            let mine = calls_at(addr);
            until("the restarted provider taking calls", || {
                calls_at(addr) >= mine + 50
            })
            .await;
            eprintln!("{addr}: stopped and restarted; back in rotation {back:?} after it listened");
        }
        let total = load.total();
        until("calls after the last restart", || {
            load.total() >= total + 500
        })
        .await;
        let took = t0.elapsed();
        let (ok, failed, errors) = load.finish().await;
        (ok, failed, errors, took)
    });
    eprintln!(
        "rolling restart: {} calls in {took:?} ({:.0}/s), {failed} failed",
        ok + failed,
        (ok + failed) as f64 / took.as_secs_f64()
    );
    assert_eq!(
        failed,
        0,
        "{failed} of {} calls failed: {:?}",
        ok + failed,
        &errors[..errors.len().min(10)]
    );
}
