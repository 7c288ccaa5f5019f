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
