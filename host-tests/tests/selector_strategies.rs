//! The weight-aware selectors of issue 17 through the real host and the embedded
//! components: shares of weighted endpoints, keys moved by consistent hashing, and the
//! default selector following effective weights end to end (a real client, real providers).
//! Assertions are on counts and ratios.

use axle::client::Client;
use axle::manifest::EndpointSpec;
use axle::plugin::LoadedPlugin;
use axle_host_tests::{
    assert_round_robin, calls_per_server, manifest, rt, selector, table, ServeProcess, TestHost,
};

fn load(t: &TestHost, builtin: &str, config: &str) -> LoadedPlugin {
    let extra = if config.is_empty() {
        String::new()
    } else {
        format!("[plugins.s.config]\n{config}")
    };
    t.load(
        &manifest("s", "selector", &format!("builtin:{builtin}"), &extra),
        "s",
    )
    .unwrap()
}

/// Picks `n` times from set 0 = every endpoint of `weights`; the count per endpoint.
fn counts(p: &LoadedPlugin, weights: &[u32], n: u64) -> Vec<u64> {
    let s = selector(p);
    s.endpoints_changed(&table(weights));
    s.define_set(0, (0..weights.len() as u32).collect());
    let mut counts = vec![0u64; weights.len()];
    for i in 1..=n {
        let pick = s.select(0, i).unwrap();
        assert!(pick.by_plugin, "{}: the plugin answered", p.name);
        counts[pick.endpoint as usize] += 1;
    }
    counts
}

/// Each share within 3 points of its weight's share.
fn assert_shares(name: &str, counts: &[u64], weights: &[u32]) {
    let total: u64 = counts.iter().sum();
    let weight: u32 = weights.iter().sum();
    for (c, w) in counts.iter().zip(weights) {
        let got = *c as f64 / total as f64;
        let expected = f64::from(*w) / f64::from(weight);
        assert!(
            (got - expected).abs() <= 0.03,
            "{name}: share {got:.4} for weight share {expected:.4} ({counts:?})"
        );
    }
}

#[test]
fn weight_aware_selectors_split_100_100_600_as_12_12_75() {
    let t = TestHost::new();
    let weights = [100, 100, 600];
    for builtin in [
        "smooth-weighted",
        "least-active",
        "p2c-ewma",
        "shortest-response",
        "weighted-random",
    ] {
        let p = load(&t, builtin, "");
        let c = counts(&p, &weights, 8_000);
        assert_shares(builtin, &c, &weights);
        assert_eq!(p.stats.snapshot().faults(), 0, "{builtin}");
    }
    // Smooth weighted round-robin is exact over each period of 8 picks.
    let p = load(&t, "smooth-weighted", "");
    assert_eq!(counts(&p, &weights, 8_000), [1_000, 1_000, 6_000]);
}

#[test]
fn smooth_weighted_with_equal_weights_is_round_robin() {
    let t = TestHost::new();
    assert_round_robin(&load(&t, "smooth-weighted", ""));
}

#[test]
fn consistent_hash_moves_only_the_keys_of_the_endpoint_that_left() {
    let t = TestHost::new();
    let p = load(&t, "consistent-hash", "");
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 10]));
    s.define_set(0, (0..10).collect());
    s.define_set(1, (0..10).filter(|id| *id != 6).collect());
    let keys = 1..=10_000u64;
    let before: Vec<u32> = keys
        .clone()
        .map(|k| s.select(0, k).unwrap().endpoint)
        .collect();
    let after: Vec<u32> = keys.map(|k| s.select(1, k).unwrap().endpoint).collect();
    let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    let on_removed = before.iter().filter(|b| **b == 6).count();
    let share = moved as f64 / 10_000.0;
    assert!(
        (0.07..=0.13).contains(&share),
        "{moved} of 10,000 keys moved"
    );
    assert_eq!(
        moved, on_removed,
        "only keys that were on the removed endpoint move"
    );
    // The same key, the same endpoint, call after call.
    assert!((0..100).all(|_| s.select(0, 77).unwrap().endpoint == before[76]));
    assert_eq!(p.stats.snapshot().faults(), 0);
}

/// A set large enough for the ring's cap (131,072 points, a 512 KiB table of owners),
/// through the host: both sets are built without a fault, every pick is the plugin's, and
/// when 100 of 10,000 endpoints leave, the keys that move are exactly theirs, about 1%.
#[test]
fn consistent_hash_over_10_000_endpoints_moves_only_the_leavers_keys() {
    let t = TestHost::new();
    let p = load(&t, "consistent-hash", "");
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 10_000]));
    let leaving = |id: &u32| id % 100 == 42;
    s.define_set(0, (0..10_000).collect());
    s.define_set(1, (0..10_000).filter(|id| !leaving(id)).collect());
    let pick = |set: u32, key: u64| {
        let pick = s.select(set, key).unwrap();
        assert!(pick.by_plugin, "set {set}, key {key}: the plugin answered");
        pick.endpoint
    };
    let keys = 1..=100_000u64;
    let before: Vec<u32> = keys.clone().map(|k| pick(0, k)).collect();
    let after: Vec<u32> = keys.map(|k| pick(1, k)).collect();
    let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    let on_leavers = before.iter().filter(|b| leaving(b)).count();
    assert_eq!(moved, on_leavers, "only the leavers' keys move");
    assert!(
        (500..=1_500).contains(&moved),
        "{moved} of 100,000 keys moved"
    );
    assert!(after.iter().all(|a| !leaving(a)));
    assert_eq!(p.stats.snapshot().faults(), 0);
}

#[test]
fn shortest_response_prefers_the_shortest_expected_wait() {
    let t = TestHost::new();
    let p = load(&t, "shortest-response", "choices = 3");
    let facts = t.host.facts();
    // Waits: 0: (1+1) × 10 ms = 20 ms, 1: (0+1) × 30 ms = 30 ms, 2: (3+1) × 4 ms = 16 ms.
    for (id, latency_ms, in_flight) in [(0u32, 10u64, 1u32), (1, 30, 0), (2, 4, 3)] {
        let cell = facts.register(id, 100);
        cell.started();
        cell.finished(latency_ms * 1_000_000, axle::spi::OutcomeClass::Success);
        for _ in 0..in_flight {
            cell.started();
        }
    }
    assert_eq!(counts(&p, &[100; 3], 1_000), [0, 0, 1_000]);
    // Two more in flight at 2: (5+1) × 4 = 24 ms, and 0 is the shortest.
    facts.get(2).unwrap().started();
    facts.get(2).unwrap().started();
    assert_eq!(counts(&p, &[100; 3], 1_000), [1_000, 0, 0]);
}

#[test]
fn the_default_selector_follows_configured_weights_and_warm_up() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let t = TestHost::new();
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    assert_eq!(m.slots.selector.as_deref(), Some("smooth-weighted"));
    let endpoints = servers
        .iter()
        .zip([100u32, 100, 600])
        .map(|(s, w)| EndpointSpec {
            weight: w,
            ..EndpointSpec::new(&s.addr)
        });
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("flaky", endpoints),
    )
    .unwrap();
    let runtime = rt();
    let calls = |n: u32| calls_per_server(&runtime, &client, &servers, n);
    // 100/100/600: the default selector gives 12.5/12.5/75 %, exactly per period of 8.
    assert_eq!(calls(800), [100, 100, 600]);
    // The heavy provider (re)starts warming up at a sixth of its weight: effective 100,
    // the kernel republishes the table, and the shares follow with no other change.
    client.set_warmups(&[(servers[2].addr.clone(), 1000 / 6)]);
    let even = calls(900);
    for c in &even {
        assert!((280..=320).contains(c), "{even:?}");
    }
}
