//! A run-selector (the shipped `round-robin` and `smooth-weighted`, WIT `run-selector`) on
//! the client's real request path, against three real `axle serve` processes, called by
//! eight callers on a two-worker runtime: about one plugin call per run of four picks, and
//! each provider still gets its share of the rotation.

use axle::manifest::EndpointSpec;
use axle_host_tests::{
    admin_stats, client_for, drive_echo, plugin_calls, rt, ServeProcess, TestHost,
};

const CALLERS: usize = 8;

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
    let endpoints = providers.iter().map(|p| EndpointSpec::new(&p.addr));
    let client = client_for(&t.host, "echo", selector, endpoints.collect());
    let call = |n: u64| {
        let per_caller = n / CALLERS as u64;
        let (ok, failed) = drive_echo(&runtime, &client, CALLERS, per_caller, selector, |_, _| {
            axle::client::CallOptions::default()
        });
        assert_eq!((ok, failed), (n, 0), "{selector}: every call answered");
    };
    // Warm: the table pushed and the set defined before counting.
    call(CALLERS as u64 * 3);
    let calls = plugin_calls(&client, selector);
    let before: Vec<u64> = providers.iter().map(served).collect();
    call(n);
    let after = providers.iter().map(served);
    let shares = after.zip(before).map(|(a, b)| a - b).collect();
    (plugin_calls(&client, selector) - calls, shares)
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
        // Runs of four, four runs an ask, the rest held by the thread that asked for its
        // next calls: a quarter of the picks are calls, less the fifteen picks at most
        // each thread picking (two workers and the one blocking on them) held from the
        // warm-up, and a table pushed mid-run (a health change) only adds a few.
        assert!(calls >= (n - 3 * 15) / 4, "{selector}: {calls} calls");
        assert!(calls <= n / 3, "{selector}: {calls} calls for {n} picks");
        // Equal weights: a third each. A thread that moves on hands the picks it did not
        // use back to the set, so none is dropped.
        for share in &shares {
            assert!(
                (n / 3 - n / 20..=n / 3 + n / 20).contains(share),
                "{selector}: {shares:?}"
            );
        }
    }
}
