use super::*;
use axle_sdk::{ConfigValue, LimiterRuntime};

const MS: u64 = 1_000_000;

fn runtime(pairs: Vec<(&str, ConfigValue)>) -> LimiterRuntime<AdaptiveConcurrency> {
    let mut rt = LimiterRuntime::new(&Config::from_pairs(pairs)).unwrap();
    rt.key_defined(0, LimitKey::default());
    rt
}

/// Fills key 0 up to its limit; how many were admitted.
fn fill(rt: &mut LimiterRuntime<AdaptiveConcurrency>) -> u32 {
    let mut n = 0;
    while rt.acquire(0, 1) == Admission::Admit {
        n += 1;
        assert!(n <= 100_000, "no limit");
    }
    n
}

/// `rounds` of: fill the key to its limit, then end every request after `latency_ms`.
/// Returns the limit after the last round.
fn run(rt: &mut LimiterRuntime<AdaptiveConcurrency>, rounds: usize, latency_ms: u64) -> u32 {
    let mut limit = 0;
    for _ in 0..rounds {
        limit = fill(rt);
        for _ in 0..limit {
            rt.release(0, 1, latency_ms * MS, false);
        }
    }
    limit
}

#[test]
fn admits_up_to_the_limit_and_a_release_frees_a_place() {
    let mut rt = runtime(vec![("initial-limit", ConfigValue::Int(5))]);
    assert_eq!(fill(&mut rt), 5);
    assert_eq!(rt.acquire(0, 1), Admission::Reject { retry_after_ms: 1 });
    rt.release(0, 1, 30 * MS, false);
    assert_eq!(rt.acquire(0, 1), Admission::Admit);
    // The retry-after is the latest latency.
    assert_eq!(rt.acquire(0, 1), Admission::Reject { retry_after_ms: 30 });
}

#[test]
fn the_limit_grows_while_latency_holds_and_stops_at_max() {
    let mut rt = runtime(vec![
        ("initial-limit", ConfigValue::Int(10)),
        ("max-limit", ConfigValue::Int(60)),
    ]);
    let first = run(&mut rt, 1, 5);
    assert_eq!(first, 10);
    // Each busy sample adds about queue-size × smoothing = 0.8, and the first half of a
    // round's releases are busy ones (the key used at least half its limit).
    let after = run(&mut rt, 1, 5);
    assert!((12..=15).contains(&after), "10 samples grew it to {after}");
    assert_eq!(run(&mut rt, 20, 5), 60, "bounded by max-limit");
}

#[test]
fn the_limit_falls_when_latency_climbs_and_recovers_when_it_settles() {
    let mut rt = runtime(vec![
        ("initial-limit", ConfigValue::Int(50)),
        ("max-limit", ConfigValue::Int(100)),
    ]);
    let before = run(&mut rt, 5, 10);
    assert!(before >= 50, "{before}");
    // Latency ×4: the gradient drops to its floor (0.5), and the limit with it, until the
    // long average (600 samples) has learned the new latency.
    let queued = run(&mut rt, 2, 40);
    assert!(
        queued <= before / 4,
        "latency ×4 left the limit at {queued} (was {before})"
    );
    assert!(queued >= 1);
    // Latency back: it grows again.
    let recovered = run(&mut rt, 30, 10);
    assert!(recovered > queued * 2, "{queued} -> {recovered}");
}

#[test]
fn a_dropped_request_backs_the_limit_off_within_its_bounds() {
    let mut rt = runtime(vec![
        ("initial-limit", ConfigValue::Int(40)),
        ("min-limit", ConfigValue::Int(4)),
        ("backoff", ConfigValue::Float(0.5)),
    ]);
    assert_eq!(fill(&mut rt), 40);
    rt.release(0, 1, 5 * MS, true);
    rt.release(0, 1, 5 * MS, true);
    for _ in 0..38 {
        rt.release(0, 1, 5 * MS, true);
    }
    assert_eq!(fill(&mut rt), 4, "halved down to min-limit, not below");
}

#[test]
fn a_key_using_under_half_its_limit_does_not_grow_it() {
    let mut rt = runtime(vec![("initial-limit", ConfigValue::Int(10))]);
    for _ in 0..1000 {
        assert_eq!(rt.acquire(0, 1), Admission::Admit);
        rt.release(0, 1, 5 * MS, false);
    }
    assert_eq!(fill(&mut rt), 10);
}

#[test]
fn hands_its_limit_to_its_next_version() {
    let config = Config::from_pairs([("initial-limit", ConfigValue::Int(10))]);
    let mut old = runtime(vec![("initial-limit", ConfigValue::Int(10))]);
    run(&mut old, 5, 5);
    let grown = fill(&mut old);
    assert!(grown > 10);
    let state = old.export_state();
    let mut new = LimiterRuntime::<AdaptiveConcurrency>::new(&config).unwrap();
    new.import_state(&state);
    new.key_defined(0, LimitKey::default());
    assert_eq!(fill(&mut new), grown, "the limit it had learned");
    let bounded = Config::from_pairs([
        ("initial-limit", ConfigValue::Int(2)),
        ("max-limit", ConfigValue::Int(3)),
    ]);
    let mut small = LimiterRuntime::<AdaptiveConcurrency>::new(&bounded).unwrap();
    small.import_state(&state);
    small.key_defined(0, LimitKey::default());
    assert_eq!(fill(&mut small), 3, "the new max-limit bounds it");
}

#[test]
fn rejects_config_that_cannot_work_naming_the_key() {
    let err = |pairs: Vec<(&str, ConfigValue)>| {
        LimiterRuntime::<AdaptiveConcurrency>::new(&Config::from_pairs(pairs))
            .err()
            .unwrap()
    };
    for (key, value) in [
        ("min-limit", ConfigValue::Int(0)),
        ("max-limit", ConfigValue::Int(0)),
        ("initial-limit", ConfigValue::Int(5000)),
        ("smoothing", ConfigValue::Float(0.0)),
        ("tolerance", ConfigValue::Float(0.5)),
        ("queue-size", ConfigValue::Int(-1)),
        ("long-window", ConfigValue::Int(0)),
        ("backoff", ConfigValue::Float(1.5)),
        ("rate", ConfigValue::Int(5)),
    ] {
        let e = err(vec![(key, value)]);
        assert!(e.contains(key), "{key}: {e}");
    }
}
