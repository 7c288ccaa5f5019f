//! A leasing limiter (the shipped `token-bucket`, WIT `leasing-limiter`) on the provider's
//! real request path, in a real `axle serve`, called from a two-worker runtime by several
//! callers at once: far from its limit it is asked for a fraction of the requests it
//! admits (the rest ride its leases), and where its limit binds it admits no more than
//! its bucket allows.

use std::time::Instant;

use axle::manifest::EndpointSpec;
use axle::plugin::PluginHost;
use axle_host_tests::{admin_stats, drive_echo, governed_client, rt, ServeProcess};

const CALLERS: usize = 8;

/// `axle serve` on the embedded manifest with the token bucket's `rate` and `burst` set.
fn serve_with_bucket(dir: &std::path::Path, rate: u64, burst: u64) -> ServeProcess {
    const EMBEDDED: &str = "rate = 1000000\nburst = 100000\n";
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    assert!(
        base.contains(EMBEDDED),
        "the embedded bucket's rate and burst"
    );
    let text = base.replacen(EMBEDDED, &format!("rate = {rate}\nburst = {burst}\n"), 1);
    let manifest = dir.join("plugins.toml");
    std::fs::write(&manifest, text).unwrap();
    ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_LOG", "error")],
    )
}

/// (the token bucket's plugin calls, what the `echo` methods' limiter admitted, refused).
fn counts(server: &ServeProcess) -> (u64, u64, u64) {
    let report = admin_stats(server.admin.as_deref().expect("--admin prints its address"));
    let server = &report["servers"][0];
    let calls = server["plugins"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "token-bucket"))
        .and_then(|p| p["calls"].as_u64())
        .unwrap_or_else(|| panic!("the token bucket's calls in {report}"));
    let methods = server["methods"].as_array().expect("methods");
    let sum = |field: &str| -> u64 {
        methods
            .iter()
            .filter(|m| m["service"] == "echo")
            .map(|m| m[field].as_u64().unwrap_or(0))
            .sum()
    };
    (calls, sum("limiter_admitted"), sum("limiter_rejected"))
}

/// A client of `server`'s `echo` that never retries, so each call is one request there.
fn client(host: &PluginHost, server: &ServeProcess) -> axle::client::Client {
    governed_client(
        host,
        "echo",
        vec![EndpointSpec::new(server.addr.clone())],
        "retries = 0",
    )
}

#[test]
fn far_from_its_limit_a_token_bucket_is_asked_for_a_fraction_of_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    // The embedded defaults: a million a second, a burst of 100,000.
    let server = serve_with_bucket(dir.path(), 1_000_000, 100_000);
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let client = client(&host, &server);
    let (before, _, _) = counts(&server);
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, 250, "leased", |_, _| {
        axle::client::CallOptions::default()
    });
    assert_eq!((ok, failed), (2_000, 0), "every call admitted and answered");
    let (after, admitted, rejected) = counts(&server);
    let asked = after - before;
    eprintln!("2,000 admitted; the token bucket was called {asked} times");
    assert_eq!((admitted, rejected), (2_000, 0));
    // A call leases up to 64 more for a millisecond on its thread: callers eight deep
    // send requests far closer together than that.
    assert!(asked >= 1, "the plugin decides: it was asked");
    assert!(asked * 2 < admitted, "asked {asked} times for {admitted}");
}

#[test]
fn where_its_limit_binds_a_leasing_bucket_admits_no_more_than_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    // 2,000 a second leases 2 a millisecond while more than 200 of its 400 are left.
    let (rate, burst) = (2_000, 400);
    let server = serve_with_bucket(dir.path(), rate, burst);
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let client = client(&host, &server);
    let started = Instant::now();
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, 500, "limited", |_, _| {
        axle::client::CallOptions::default()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let (_, admitted, rejected) = counts(&server);
    eprintln!("{ok} admitted, {failed} refused in {elapsed:.3} s");
    assert_eq!(ok + failed, 4_000);
    assert_eq!((admitted, rejected), (ok, failed), "the provider's counts");
    // Every request the plugin admitted or leased took a token, and the bucket never
    // held more than its burst plus what its rate refilled while the calls ran.
    let most = burst as f64 + rate as f64 * elapsed;
    assert!(
        (admitted as f64) <= most,
        "{admitted} admitted, at most {most:.0}"
    );
    assert!(
        rejected > 0,
        "4,000 calls beyond a burst of 400 at 2,000 a second"
    );
}
