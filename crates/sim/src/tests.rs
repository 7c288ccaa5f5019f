//! Whole runs through the real plugins and the kernel's logic: determinism, overload,
//! ejection of a killed provider.

use crate::{run, Scenario};

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text).unwrap()
}

const THREE: &str = r#"
seed = 7
duration-s = 20
sample-ms = 1000
[arrivals]
kind = "poisson"
rate-per-s = 300
[[providers]]
name = "p"
count = 3
capacity = 50
latency = { kind = "lognormal", p50-ms = 2, p99-ms = 10 }
"#;

#[test]
fn the_same_seed_gives_the_same_json() {
    let s = scenario(&format!(
        "{THREE}[[faults]]\nat-s = 5\nkind = \"half-dead\"\ngroup = \"p\"\nmembers = [0]\nshare = 0.4\n"
    ));
    let a = serde_json::to_string(&run(&s, None, None).unwrap().report).unwrap();
    let b = serde_json::to_string(&run(&s, None, None).unwrap().report).unwrap();
    assert_eq!(a, b);
    let c = serde_json::to_string(&run(&s, None, Some(8)).unwrap().report).unwrap();
    assert_ne!(a, c, "another seed, another run");
}

#[test]
fn overload_builds_queueing_latency() {
    // 300 calls/s of ~10 ms on one provider: 3 slots hold ~30% load, 2 slots ~150%.
    let base = r#"
duration-s = 10
[arrivals]
kind = "poisson"
rate-per-s = 300
[[providers]]
name = "p"
count = 1
latency = { kind = "constant", ms = 10 }
"#;
    let roomy = run(&scenario(&format!("{base}capacity = 10\n")), None, None)
        .unwrap()
        .report;
    let tight = run(&scenario(&format!("{base}capacity = 2\n")), None, None)
        .unwrap()
        .report;
    assert!(
        (9.0..12.0).contains(&roomy.totals.p50_ms),
        "{:?}",
        roomy.totals
    );
    assert!(
        tight.totals.p99_ms > 5.0 * roomy.totals.p99_ms
            || tight.totals.errors.contains_key("timeout"),
        "queueing: {:?} vs {:?}",
        tight.totals,
        roomy.totals
    );
}

#[test]
fn a_killed_provider_gets_no_traffic_after_its_ejection() {
    let s = scenario(&format!(
        "{THREE}[[faults]]\nat-s = 5\nkind = \"kill\"\ngroup = \"p\"\nmembers = [1]\n"
    ));
    let r = run(&s, None, None).unwrap().report;
    // Unreachable at once (its connections closed and the re-dial is refused).
    assert!(
        r.totals.health.get("unreachable").copied().unwrap_or(0) >= 1,
        "{:?}",
        r.totals
    );
    let after: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_s > 6.0)
        .map(|p| p.endpoints["p-1"])
        .collect();
    assert!(
        !after.is_empty() && after.iter().all(|s| *s == 0.0),
        "{after:?}"
    );
    let before = r.series.iter().find(|p| p.t_s == 3.0).unwrap().endpoints["p-1"];
    assert!(before > 0.2, "{before}");
    assert_eq!(r.endpoints[1].state, "dead");
    // Only the calls in flight at the kill fail (a reset of a non-idempotent call).
    let failed: u64 = r.totals.errors.values().sum();
    assert!(failed < 20, "{:?}", r.totals);
}

#[test]
fn the_bench_scenario_is_ten_thousand_providers_and_a_million_requests() {
    let (s, m) = crate::bench_scenario().unwrap();
    assert_eq!(s.provider_count(), 10_000);
    assert_eq!(s.arrivals.max_requests, Some(1_000_000));
    assert_eq!(m.slots.selector.as_deref(), Some("p2c-ewma"));
}

#[test]
fn plots_are_svg_files_naming_their_series() {
    let s = scenario(THREE);
    let a = run(&s, None, None).unwrap().report;
    let dir = tempfile::tempdir().unwrap();
    let files = crate::plot::single(dir.path(), &a).unwrap();
    assert_eq!(files.len(), 3);
    let share = std::fs::read_to_string(dir.path().join("share.svg")).unwrap();
    assert!(share.starts_with("<svg") && share.contains("p-0") && share.contains("p-2"));
    let both = crate::plot::compare(dir.path(), ("one", &a), ("two", &a)).unwrap();
    let text = std::fs::read_to_string(&both[0]).unwrap();
    assert!(text.contains("one: traffic share") && text.contains("two: traffic share"));
}

#[test]
fn each_caller_process_judges_for_itself() {
    // Two callers, each with its own kernel: each sees the half-dead provider and
    // removes it from its own rotation (two ejections), on its own share of the traffic.
    let text = format!(
        "callers = 2\n{THREE}[[faults]]\nat-s = 2\nkind = \"half-dead\"\ngroup = \"p\"\n\
         members = [0]\nshare = 0.6\n"
    )
    .replace("rate-per-s = 300", "rate-per-s = 600");
    let r = run(&scenario(&text), None, None).unwrap().report;
    let disabled = r
        .health_events
        .iter()
        .filter(|e| e.what == "disabled" && e.endpoint == "p-0");
    assert_eq!(disabled.count(), 2, "{:?}", r.health_events);
    let late: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_s > 8.0)
        .map(|p| p.endpoints["p-0"])
        .collect();
    assert!(late.iter().all(|s| *s < 0.01), "{late:?}");
}

#[test]
fn a_partition_loses_heartbeats_then_heals() {
    // Heartbeats every second (the default), three lost make it unreachable; healed at
    // 10 s, the next heartbeat tick's re-dial brings it back.
    let s = scenario(&format!(
        "{THREE}[[faults]]\nat-s = 4\nkind = \"partition\"\ngroup = \"p\"\nmembers = [2]\nfor-s = 6\n"
    ));
    let r = run(&s, None, None).unwrap().report;
    let what: Vec<&str> = r
        .health_events
        .iter()
        .filter(|e| e.endpoint == "p-2")
        .map(|e| e.what.as_str())
        .collect();
    assert!(
        what.contains(&"unreachable") && what.last() == Some(&"readmitted"),
        "{what:?}"
    );
    let share = |t: f64| r.series.iter().find(|p| p.t_s == t).unwrap().endpoints["p-2"];
    assert_eq!(share(9.0), 0.0);
    assert!(share(15.0) > 0.2, "{}", share(15.0));
}

#[test]
fn a_discovery_outage_holds_the_list() {
    // Killed at 2 s, its lease expires 1 s later, but discovery is out from 1 s to 6 s:
    // it leaves the list only when discovery is back.
    let s = scenario(&format!(
        "discovery-ttl-s = 1\n{THREE}[[faults]]\nat-s = 2\nkind = \"kill\"\ngroup = \"p\"\n\
         members = [1]\n[[faults]]\nat-s = 1\nkind = \"discovery-outage\"\nfor-s = 5\n"
    ));
    let r = run(&s, None, None).unwrap().report;
    let delisted = r
        .health_events
        .iter()
        .find(|e| e.what == "delisted")
        .unwrap();
    assert_eq!((delisted.endpoint.as_str(), delisted.t_s), ("p-1", 6.0));
    assert_eq!(r.endpoints[1].state, "delisted");
}

/// The server's limiter slot filled with `plugin` (a builtin) and `config`; calls are
/// neither retried nor failed over, so each limiter rejection is a failed call.
fn limited(plugin: &str, config: &str) -> axle_manifest::Manifest {
    let text = format!(
        "[plugins.lim]\nkind = \"limiter\"\ncomponent = \"builtin:{plugin}\"\ntimeout-ms = 1000\n\
         [plugins.lim.config]\n{config}\n\
         [slots]\nselector = \"round-robin\"\nlimiter = \"lim\"\n\
         [governance]\ntimeout-ms = 300\nretries = 0\nmax-failovers = 0\nbreaker = false\n"
    );
    // Through a file: the embedded defaults under it, as `axle sim` reads a manifest.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limited.toml");
    std::fs::write(&path, text).unwrap();
    axle_manifest::Manifest::load_or_embedded(Some(&path)).unwrap()
}

/// `count` providers of 1 ms and room for 100 at once, called `rate` times a second at
/// a constant pace for `secs` seconds.
fn steady(count: u32, rate: u32, secs: u32) -> Scenario {
    scenario(&steady_text(count, rate, secs))
}

fn steady_text(count: u32, rate: u32, secs: u32) -> String {
    format!(
        "seed = 3\nduration-s = {secs}\n[arrivals]\nkind = \"constant\"\nrate-per-s = {rate}\n\
         [[providers]]\nname = \"p\"\ncount = {count}\ncapacity = 100\n\
         latency = {{ kind = \"constant\", ms = 1 }}\n"
    )
}

#[test]
fn each_provider_has_its_own_token_bucket() {
    // Two providers of rate R = 50/s, burst B = 20, offered 300/s (3× their sum) for
    // T = 10 s: each admits about R·T + B, the rest is `rate_limited`.
    let (r, b, t) = (50.0, 20.0, 10.0);
    let run = crate::run_with(
        &steady(2, 300, 10),
        limited("token-bucket", "rate = 50\nburst = 20"),
        "limited.toml",
        None,
    )
    .unwrap();
    let report = run.report;
    let expected = 2.0 * (r * t + b);
    let ok = report.totals.ok as f64;
    // 2%: the last partial token and the calls in flight at the end.
    assert!(
        (ok - expected).abs() <= 0.02 * expected,
        "admitted {ok}, expected {expected}: {:?}",
        report.totals
    );
    let limited = report
        .totals
        .errors
        .get("rate_limited")
        .copied()
        .unwrap_or(0);
    assert_eq!(
        report.totals.ok + limited,
        report.totals.requests,
        "every other call is rate_limited: {:?}",
        report.totals
    );
    let per: Vec<u64> = report.endpoints.iter().map(|e| e.rate_limited).collect();
    assert_eq!(per.iter().sum::<u64>(), limited, "{per:?}");
    assert!(per.iter().all(|n| *n > 0), "both providers limit: {per:?}");
}

#[test]
fn a_concurrency_limiter_hears_every_end() {
    // Two in flight at most per provider, and a light load (1 ms calls, 100/s): had the
    // limiter never heard a request end, each provider would admit two calls in all.
    let run = crate::run_with(
        &steady(2, 100, 10),
        limited("adaptive-concurrency", "initial-limit = 2\nmax-limit = 2"),
        "limited.toml",
        None,
    )
    .unwrap();
    let t = &run.report.totals;
    assert!(t.ok >= 990, "{t:?}");
    assert_eq!(t.errors.get("rate_limited"), None, "{t:?}");
}

#[test]
fn a_limiter_for_too_many_providers_is_not_simulated() {
    // A limiter that would reject nearly everything: none of it shows, since above the
    // cap the providers run without one (the run says so on stderr).
    let over = crate::limit::MAX_LIMITED as u32 + 1;
    let run = crate::run_with(
        &steady(over, 10, 1),
        limited("token-bucket", "rate = 1\nburst = 1"),
        "limited.toml",
        None,
    )
    .expect("runs without the limiter");
    let t = &run.report.totals;
    assert!(t.ok > 0, "{t:?}");
    assert_eq!(t.errors.get("rate_limited"), None, "{t:?}");
}

#[test]
fn the_bench_scenario_runs_under_the_embedded_limiter() {
    // `axle bench sim`'s manifest keeps the embedded defaults' limiter slot: 10,000
    // providers must not make the run an error.
    let (s, m) = crate::bench_scenario().unwrap();
    assert!(
        m.slots.limiter.is_some(),
        "the defaults fill the limiter slot"
    );
    let host = axle_plugin_host::PluginHost::new(None).unwrap();
    let limits = crate::limit::Limits::load(
        &host,
        &m,
        s.providers.iter().map(|g| g.count as usize).sum(),
    )
    .expect("no error");
    assert!(limits.is_none());
}

#[test]
fn a_limited_run_is_deterministic() {
    let go = || {
        let m = limited("adaptive-concurrency", "initial-limit = 2\nmax-limit = 4");
        let run = crate::run_with(&steady(2, 400, 3), m, "limited.toml", None).unwrap();
        serde_json::to_string(&run.report).unwrap()
    };
    assert_eq!(go(), go());
}

#[test]
fn a_hung_attempt_given_up_on_is_released_as_dropped() {
    // One provider hanging half its calls, two in flight at most: a hung call holds its
    // place until its caller gives up (300 ms). Were it not released then, the first two
    // hangs would fill the limit for good and every later call be rejected.
    let s = scenario(&format!(
        "{}[[faults]]\nat-s = 0\nkind = \"half-dead\"\ngroup = \"p\"\nmembers = [0]\nshare = 0.5\n",
        steady_text(1, 100, 10)
    ));
    let m = limited("adaptive-concurrency", "initial-limit = 2\nmax-limit = 2");
    let t = crate::run_with(&s, m, "limited.toml", None)
        .unwrap()
        .report
        .totals;
    assert!(t.errors.get("timeout").copied().unwrap_or(0) > 10, "{t:?}");
    assert!(t.ok > 20, "{t:?}");
}

#[test]
fn the_limited_example_serves_what_its_buckets_admit() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim/limited.toml");
    let s = Scenario::load(&path).unwrap();
    let t = run(&s, None, None).unwrap().report.totals;
    // What its comment says: about 1,040 served, the rest `rate_limited`.
    assert!((1_020..=1_060).contains(&t.ok), "{t:?}");
    assert_eq!(t.ok + t.errors["rate_limited"], t.requests, "{t:?}");
}
