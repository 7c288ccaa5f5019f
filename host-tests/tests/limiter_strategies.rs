//! The sliding-window and adaptive-concurrency limiters through the real host and the
//! real components (the bytes the `axle` binary embeds), asserted with numbers: how many
//! requests each admits over a bounded run, against what its config allows.

use std::time::{Duration, Instant};

use axle::plugin::kinds::limiter::LimiterPlugin;
use axle::plugin::{LoadedPlugin, Plugin};
use axle::spi::{Admission, LimitKey};
use axle_host_tests::{manifest, TestHost};

fn limiter(p: &LoadedPlugin) -> &LimiterPlugin {
    match &p.plugin {
        Plugin::Limiter(l) => l,
        _ => panic!("not a limiter"),
    }
}

fn key(app: &str) -> LimitKey {
    LimitKey {
        service: "echo".into(),
        method: "get".into(),
        consumer_app: app.into(),
        consumer_ip: "127.0.0.1".into(),
    }
}

fn admitted(l: &LimiterPlugin, key: u32, tries: usize) -> usize {
    (0..tries)
        .filter(|_| l.acquire(key, 1).admission == Admission::Admit)
        .count()
}

#[test]
fn sliding_window_admits_its_rate_over_a_run_and_no_burst_beyond_it() {
    let t = TestHost::new();
    // 200 per second over 100 ms windows: 20 per window.
    let extra = "[plugins.sw.config]\nrate = 200\nwindow-ms = 100";
    let p = t
        .load(
            &manifest("sw", "limiter", "builtin:sliding-window", extra),
            "sw",
        )
        .unwrap();
    let l = limiter(&p);
    assert!(!l.wants_release(), "a rate limiter is not called back");
    let k = l.key_id(&key(""));
    assert_eq!(admitted(l, k, 500), 20, "one window's worth at once");
    match l.acquire(k, 1).admission {
        Admission::Reject { retry_after_ms } => {
            assert!((1..=200).contains(&retry_after_ms), "{retry_after_ms}")
        }
        Admission::Admit => panic!("admitted beyond the window"),
    }
    // A bounded run of tries every millisecond: the sliding window holds at most 20 in
    // any 100 ms, so over the run's time T the admitted count is within one window of
    // 200 × T (the interpolation's error is at most one window's count).
    let start = Instant::now();
    let mut count = 20usize;
    let mut tries = 0;
    while start.elapsed() < Duration::from_millis(600) && tries < 20_000 {
        count += admitted(l, k, 1);
        tries += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    let expected = 200.0 * start.elapsed().as_secs_f64();
    eprintln!(
        "admitted {count} in {:?} ({expected:.0} at the rate)",
        start.elapsed()
    );
    assert!(
        (count as f64) <= expected + 20.0 + 1.0,
        "{count} admitted, the rate allows {expected:.0} + one window"
    );
    assert!(
        (count as f64) >= expected - 20.0 - 1.0,
        "{count} admitted, the rate allows {expected:.0} − one window"
    );
    assert_eq!(p.stats.snapshot().faults(), 0);
}

#[test]
fn sliding_window_quotas_give_each_consumer_app_its_own_rate() {
    let t = TestHost::new();
    // A window of a minute: a test run sees exactly one window per key.
    let extra = "key-on = [\"consumer-app\"]\n[plugins.q.config]\nrate = 1\nwindow-ms = 60000\n\
                 quotas = [\"billing=2\", \"*=0.5\"]";
    let p = t
        .load(
            &manifest("q", "limiter", "builtin:sliding-window", extra),
            "q",
        )
        .unwrap();
    let l = limiter(&p);
    let billing = l.key_id(&key("billing"));
    let reports = l.key_id(&key("reports"));
    let batch = l.key_id(&key("batch"));
    assert_eq!(admitted(l, billing, 500), 120, "billing: 2/s × 60 s");
    assert_eq!(admitted(l, reports, 500), 30, "`*`: 0.5/s × 60 s");
    assert_eq!(
        admitted(l, batch, 500),
        30,
        "every other app its own `*` quota"
    );
    match l.acquire(billing, 1).admission {
        Admission::Reject { retry_after_ms } => {
            assert!(
                retry_after_ms > 50_000,
                "a minute's window: {retry_after_ms}"
            )
        }
        Admission::Admit => panic!("billing past its quota"),
    }

    // Quotas without keys per app cannot work: refused before anything loads.
    let refused = axle::manifest::Manifest::parse(
        &manifest(
            "q",
            "limiter",
            "builtin:sliding-window",
            "[plugins.q.config]\nquotas = [\"billing=2\"]",
        ),
        "test.toml",
        std::path::Path::new("/"),
    )
    .expect_err("quotas without key-on consumer-app");
    assert_eq!(refused.key, "plugins.q.key-on", "{refused}");
    // A quota the window cannot hold one request of is refused by the plugin's init.
    let bad = t.load(
        &manifest(
            "q",
            "limiter",
            "builtin:sliding-window",
            "key-on = [\"consumer-app\"]\n[plugins.q.config]\nwindow-ms = 100\nquotas = [\"billing=2\"]",
        ),
        "q",
    );
    let err = bad
        .err()
        .expect("a quota under one request per window")
        .to_string();
    assert!(err.contains("quotas"), "{err}");
}

/// Fills `key` to its limit; how many were admitted.
fn fill(l: &LimiterPlugin, key: u32) -> u32 {
    let mut n = 0;
    while l.acquire(key, 1).admission == Admission::Admit {
        n += 1;
        assert!(n <= 100_000, "no limit");
    }
    n
}

/// `rounds` of: fill the key, then end every admitted request after `latency_ms`. The
/// limit (the last fill).
fn rounds(l: &LimiterPlugin, key: u32, rounds: usize, latency_ms: u64) -> u32 {
    let mut limit = 0;
    for _ in 0..rounds {
        limit = fill(l, key);
        for _ in 0..limit {
            l.release(key, 1, latency_ms * 1_000_000, false);
        }
    }
    limit
}

#[test]
fn adaptive_concurrency_follows_latency_through_the_host() {
    let t = TestHost::new();
    let extra =
        "key-on = []\n[plugins.ac.config]\ninitial-limit = 20\nmin-limit = 2\nmax-limit = 80";
    let p = t
        .load(
            &manifest("ac", "limiter", "builtin:adaptive-concurrency", extra),
            "ac",
        )
        .unwrap();
    let l = limiter(&p);
    assert!(l.wants_release(), "it exports `release`");
    let k = l.key_id(&key(""));
    assert_eq!(fill(l, k), 20, "the initial limit");
    assert_eq!(
        l.acquire(k, 1).admission,
        Admission::Reject { retry_after_ms: 1 },
        "nothing measured yet: come back in a millisecond"
    );
    for _ in 0..20 {
        l.release(k, 1, 10_000_000, false);
    }
    // Steady latency at full use: the limit grows to its bound.
    let grown = rounds(l, k, 40, 10);
    assert_eq!(grown, 80, "max-limit");
    // Latency ×5: within two rounds the limit falls to under a quarter.
    let queued = rounds(l, k, 2, 50);
    assert!((2..=20).contains(&queued), "latency ×5: limit {queued}");
    // Dropped requests back it off (×0.9 each) to min-limit, and not below.
    let mut drops = 0;
    let mut limits = Vec::new();
    for _ in 0..20 {
        let n = fill(l, k);
        limits.push(n);
        for _ in 0..n {
            l.release(k, 1, 50_000_000, true);
        }
        drops += n;
    }
    assert_eq!(fill(l, k), 2, "min-limit after {drops} drops: {limits:?}");
    assert!(limits.windows(2).all(|w| w[1] <= w[0]), "{limits:?}");
    assert_eq!(p.stats.snapshot().faults(), 0);
}
