//! Hot-swap under load: three real providers, thousands of calls a second, and the
//! selector changed by editing the manifest file — round-robin, then p2c-ewma, then a
//! broken plugin (rejected: the running one stays), then weighted-random. No call fails,
//! and after each swap the distribution follows the strategy now in the slot.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::Manifest;
use axle::plugin::PluginHost;
use axle::swap::{watch, SwapReport, Swapper};
use axle_host_tests::{built_component, rt, ServeProcess};
use bytes::Bytes;

/// The embedded manifest with the flaky service at `endpoints` (address, weight), the
/// selector slot set to `selector`, and a `broken` selector that traps.
fn manifest_text(endpoints: &[(&str, u32)], selector: &str) -> String {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let mut text = String::new();
    for line in base.lines() {
        // Drop the embedded endpoints of `flaky` and the default selector; set our own.
        if line.starts_with("selector = \"smooth-weighted\"") {
            text.push_str(&format!("selector = \"{selector}\"\n"));
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    let text = text.replace(
        "[services.flaky]\nendpoints = [\"127.0.0.1:7300\"]\n",
        &format!(
            "[services.flaky]\nendpoints = [{}]\n[services.flaky.governance]\nidempotent = true\n",
            endpoints
                .iter()
                .map(|(a, w)| format!("{{ address = \"{a}\", weight = {w} }}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    assert!(
        text.contains("weight ="),
        "the flaky endpoints were replaced"
    );
    let trap = built_component("axle_fixture_trap");
    format!(
        "{text}\n[plugins.broken]\nkind = \"selector\"\ncomponent = {:?}\n",
        trap.to_str().unwrap()
    )
}

#[test]
fn selectors_swap_under_load_with_no_failed_call() {
    let fast = ServeProcess::start(&[]);
    // A wide latency gap, so p2c-ewma's preference shows on two busy shared cores.
    let slow1 = ServeProcess::start(&["--flaky-latency-ms", "10"]);
    let slow2 = ServeProcess::start(&["--flaky-latency-ms", "10"]);
    let endpoints = [
        (&fast.addr[..], 100),
        (&slow1.addr, 100),
        (&slow2.addr, 600),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugins.toml");
    let write = |selector: &str| {
        // Written to a temporary file and renamed, as editors and deploy tools do.
        let tmp = dir.path().join("plugins.toml.tmp");
        std::fs::write(&tmp, manifest_text(&endpoints, selector)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    write("round-robin");

    let host = Arc::new(PluginHost::new(Some(dir.path().join("cache"))).unwrap());
    let runtime = rt();
    let _enter = runtime.enter();
    let manifest = Manifest::load(&path).unwrap();
    let client = Client::new(&host, ClientConfig::new(manifest)).unwrap();
    let swapper = Arc::new(Swapper::new(host, Some(path.clone()), vec![client.clone()]));
    let (swapped, swaps) = mpsc::channel::<Result<SwapReport, String>>();
    let _watch = watch::start(swapper, move |r| {
        let _ = swapped.send(match r {
            Ok(report) => Ok(report.clone()),
            Err(e) => Err(format!("{e:#}")),
        });
    })
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let made = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (client, stop, failed, made) =
                (client.clone(), stop.clone(), failed.clone(), made.clone());
            runtime.spawn(async move {
                while !stop.load(Relaxed) && made.load(Relaxed) < 2_000_000 {
                    let r = client
                        .call_raw(
                            "flaky",
                            "x",
                            Bytes::from_static(b"hi"),
                            &CallOptions::default(),
                        )
                        .await;
                    made.fetch_add(1, Relaxed);
                    if let Err(e) = r {
                        if failed.fetch_add(1, Relaxed) < 3 {
                            eprintln!("call failed: {e}");
                        }
                    }
                }
            })
        })
        .collect();

    // The share of each provider over the next `n` calls.
    let shares = |n: u64| -> [f64; 3] {
        let count = |addr: &str| {
            client
                .endpoints()
                .into_iter()
                .find(|v| v.address == addr)
                .map_or(0, |v| v.calls)
        };
        let addrs = [&fast.addr, &slow1.addr, &slow2.addr];
        let before: Vec<u64> = addrs.iter().map(|a| count(a)).collect();
        let start = made.load(Relaxed);
        let until = Instant::now() + Duration::from_secs(60);
        while made.load(Relaxed) < start + n {
            assert!(Instant::now() < until, "the load stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
        let after: Vec<u64> = addrs.iter().map(|a| count(a)).collect();
        let total: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
        let share = |i: usize| (after[i] - before[i]) as f64 / total.max(1) as f64;
        [share(0), share(1), share(2)]
    };
    let next_swap = || {
        swaps
            .recv_timeout(Duration::from_secs(60))
            .expect("the watcher reported the swap")
    };

    let rr = shares(3_000);
    for s in rr {
        assert!((0.28..=0.39).contains(&s), "round-robin: {rr:?}");
    }

    write("p2c-ewma");
    let report = next_swap().expect("p2c-ewma went live");
    assert_eq!(report.loaded, vec!["p2c-ewma".to_string()]);
    eprintln!("swap to p2c-ewma took {} µs", report.took_us);
    // A verdict that does not depend on the machine's speed: the new selector compares the
    // latency EWMAs the kernel learns from every answer, so wait, window by window, for the state
    // "the fast provider gets the largest share", within a bound in calls rather than in
    // time. p2c-ewma draws its two candidates by weight (1:1:6), so the fast provider is in
    // at most 1/8 + 6/8 × 1/2 + 1/8 × 1/7 ≈ 52 % of the duels and can win no more than
    // that; round-robin gave it a third, its weight alone an eighth.
    let favours_fast = |what: &str| {
        let mut seen = Vec::new();
        for _ in 0..20 {
            let window = shares(1_000);
            seen.push(window);
            if window[0] > 0.45 && window[0] > window[2] {
                eprintln!(
                    "{what}: the fast provider leads after {} window(s)",
                    seen.len()
                );
                return;
            }
        }
        panic!("{what}: the fast provider never led in 20 windows of 1,000 calls: {seen:?}");
    };
    favours_fast("p2c-ewma");

    write("broken");
    let err = next_swap().expect_err("the broken plugin is rejected");
    assert!(err.contains("broken"), "{err}");
    favours_fast("p2c-ewma, after the rejected swap");

    write("weighted-random");
    let report = next_swap().expect("weighted-random went live");
    eprintln!("swap to weighted-random took {} µs", report.took_us);
    let wr = shares(4_000);
    assert!(
        (0.65..=0.85).contains(&wr[2]),
        "weighted-random follows the weights 1:1:6: {wr:?}"
    );

    stop.store(true, Relaxed);
    runtime.block_on(async {
        for w in workers {
            let _ = w.await;
        }
    });
    assert_eq!(
        failed.load(Relaxed),
        0,
        "{} of {} calls failed",
        failed.load(Relaxed),
        made.load(Relaxed)
    );
}

#[test]
fn axle_bench_swap_reports_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(axle_host_tests::axle_bin())
        .args(["bench", "swap", "--json"])
        .env("AXLE_CACHE_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["rounds"], 20);
    for way in ["explicit_us", "file_us"] {
        let v: Vec<u64> = serde_json::from_value(r[way].clone()).unwrap();
        assert!(v[0] > 0 && v[0] <= v[1] && v[1] <= v[2], "{way}: {v:?}");
    }
}

/// The embedded manifest with a tight token bucket (`burst` tokens, 1 per second) and,
/// beside it, the same component under another name.
fn limiter_manifest(limiter: &str, burst: u32) -> Manifest {
    let text = axle::manifest::defaults::EMBEDDED_MANIFEST
        .replace(
            "rate = 1000000\nburst = 100000",
            &format!("rate = 1\nburst = {burst}"),
        )
        .replace(
            "limiter = \"token-bucket\"",
            &format!("limiter = \"{limiter}\""),
        );
    let text = format!(
        "{text}\n[plugins.other-bucket]\nkind = \"limiter\"\ncomponent = \"builtin:token-bucket\"\n[plugins.other-bucket.config]\nrate = 1\nburst = {burst}\n"
    );
    Manifest::parse(&text, "test", std::path::Path::new(".")).unwrap()
}

#[test]
fn a_token_bucket_keeps_its_tokens_across_a_swap_to_its_next_version() {
    let host = PluginHost::new(None).unwrap();
    let runtime = rt();
    runtime.block_on(async {
        let server = axle::services::echo::register(
            axle::server::ServerBuilder::new()
                .with_manifest(&host, &limiter_manifest("token-bucket", 5))
                .unwrap(),
        )
        .bind("127.0.0.1:0")
        .await
        .unwrap();
        let client = axle_host_tests::client_for(
            &host,
            "echo",
            "round-robin",
            vec![axle::manifest::EndpointSpec::new(
                server.local_addr().to_string(),
            )],
        );
        let admitted = |n: usize| {
            let client = client.clone();
            async move {
                let mut ok = 0;
                for _ in 0..n {
                    let r = client
                        .call_raw("echo", "x", Bytes::new(), &CallOptions::default())
                        .await;
                    ok += usize::from(r.is_ok());
                }
                ok
            }
        };
        assert_eq!(admitted(8).await, 5, "the burst, then rejections");
        let slot = server.limiter_slot();
        // A new version of the same plugin (a bigger burst): the drained bucket stays
        // drained (a fresh one would admit 6).
        let loaded = slot
            .swap(&host, &limiter_manifest("token-bucket", 6))
            .unwrap();
        assert_eq!(loaded.loaded, ["token-bucket"]);
        assert!(admitted(3).await <= 1, "the tokens were handed over");
        // Another plugin in the slot starts from its own state: a full bucket.
        slot.swap(&host, &limiter_manifest("other-bucket", 6))
            .unwrap();
        assert_eq!(admitted(8).await, 6, "a different plugin starts fresh");
    });
}

#[test]
fn axle_swap_fills_a_slot_of_a_running_kernel_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugins.toml");
    let text = axle::manifest::defaults::EMBEDDED_MANIFEST.to_string()
        + "\n[plugins.other-bucket]\nkind = \"limiter\"\ncomponent = \"builtin:token-bucket\"\n";
    std::fs::write(&path, text).unwrap();
    let server = ServeProcess::start_with_manifest(Some(&path), &["--admin", "127.0.0.1:0"]);
    let admin = server.admin.clone().expect("admin address");
    let swap = |slot: &str, plugin: &str| {
        std::process::Command::new(axle_host_tests::axle_bin())
            .args(["swap", slot, plugin, "--admin", &admin])
            .output()
            .unwrap()
    };
    let ok = swap("limiter", "other-bucket");
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        out.contains("swapped limiter -> other-bucket") && out.contains("loaded: other-bucket"),
        "{out}"
    );
    let wrong = swap("limiter", "json");
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the running plugin stays") && err.contains("is a serializer, not a limiter"),
        "{err}"
    );
    // The server still answers through the limiter it has.
    let t = axle_host_tests::TestHost::new();
    let client = axle_host_tests::client_for(
        &t.host,
        "echo",
        "round-robin",
        vec![axle::manifest::EndpointSpec::new(&server.addr)],
    );
    rt().block_on(async {
        client
            .call_raw(
                "echo",
                "x",
                Bytes::from_static(b"hi"),
                &CallOptions::default(),
            )
            .await
            .unwrap();
    });
}
