//! A run-selector (the shipped `round-robin` and `smooth-weighted`, WIT `run-selector`) on
//! the client's real request path, against three real `axle serve` processes, called by
//! eight callers on a two-worker runtime: about one plugin call per run of four picks, and
//! each provider still gets its share of the rotation.

use axle::client::{CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle_host_tests::{admin_stats, rt, ServeProcess, TestHost};

const CALLERS: u64 = 8;

/// `echo` requests each provider answered so far.
fn served(p: &ServeProcess) -> u64 {
    let report = admin_stats(p.admin.as_deref().expect("--admin prints its address"));
    report["servers"][0]["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .filter(|m| m["service"] == "echo")
        .map(|m| m["requests"].as_u64().unwrap_or(0))
        .sum()
}

/// `n` calls through a client whose `echo` selector is `selector`, over three providers:
/// (the selector plugin's calls, the requests each provider served).
fn run_with(selector: &str, n: u64) -> (u64, Vec<u64>) {
    let providers: Vec<ServeProcess> = (0..3)
        .map(|_| ServeProcess::start(&["--admin", "127.0.0.1:0"]))
        .collect();
    let runtime = rt();
    let _in = runtime.enter();
    let t = TestHost::new();
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    m.services.entry("echo".into()).or_default().selector = Some(selector.into());
    let endpoints = providers.iter().map(|p| EndpointSpec::new(&p.addr));
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("echo", endpoints),
    )
    .unwrap();
    let plugin_calls = || {
        client
            .plugin_stats()
            .into_iter()
            .find(|(name, _)| name == selector)
            .map(|(_, stats)| stats.calls)
            .expect("the selector's counters")
    };
    let call = |n: u64| {
        runtime.block_on(async {
            let callers: Vec<_> = (0..CALLERS)
                .map(|_| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        for _ in 0..n / CALLERS {
                            let options = CallOptions::default();
                            client
                                .call_raw("echo", "say", bytes::Bytes::new(), &options)
                                .await
                                .expect("answered");
                        }
                    })
                })
                .collect();
            for caller in callers {
                caller.await.expect("a caller finished");
            }
        })
    };
    // Warm: the table pushed and the set defined before counting.
    call(CALLERS * 3);
    let (calls, before) = (
        plugin_calls(),
        providers.iter().map(served).collect::<Vec<_>>(),
    );
    call(n);
    let after = providers.iter().map(served);
    let shares = after.zip(before).map(|(a, b)| a - b).collect();
    (plugin_calls() - calls, shares)
}

#[test]
fn a_rotation_answers_runs_and_keeps_its_shares_on_the_request_path() {
    for selector in ["round-robin", "smooth-weighted"] {
        let n = 1_200;
        let (calls, shares) = run_with(selector, n);
        eprintln!("{selector}: {calls} plugin calls for {n} picks; served {shares:?}");
        assert_eq!(
            shares.iter().sum::<u64>(),
            n,
            "{selector}: every call served once"
        );
        // Runs of four, the rest of each kept for the next calls: a quarter of the picks
        // are calls, and a table pushed mid-run (a health change) only adds a few.
        assert!(calls >= n / 4, "{selector}: {calls} calls");
        assert!(calls <= n / 3, "{selector}: {calls} calls for {n} picks");
        // Equal weights: a third each. The run's picks go out in the plugin's order from
        // one place per set, so none is dropped when a thread moves on.
        for share in &shares {
            assert!(
                (n / 3 - n / 20..=n / 3 + n / 20).contains(share),
                "{selector}: {shares:?}"
            );
        }
    }
}
