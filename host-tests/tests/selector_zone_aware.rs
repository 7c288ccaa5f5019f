//! `zone-aware` end to end: a real client with the embedded component, four real providers
//! in two zones. The caller's zone gets every call while healthy, and spills its health
//! shortfall to the other zone when its endpoints' effective weights drop. Assertions are on
//! counts, with a binomial tolerance.

use axle::client::Client;
use axle::manifest::EndpointSpec;
use axle_host_tests::{calls_per_server, rt, ServeProcess, TestHost};

#[test]
fn the_own_zone_keeps_calls_until_its_health_drops_then_spills_the_shortfall() {
    let servers: Vec<ServeProcess> = (0..4).map(|_| ServeProcess::start(&[])).collect();
    let t = TestHost::new();
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    // The shipped example config: this caller is in zone `eu-west-1a`.
    m.slots.selector = Some("zone-aware".to_string());
    let zones = ["eu-west-1a", "eu-west-1a", "eu-west-1b", "eu-west-1b"];
    let endpoints = servers.iter().zip(zones).map(|(s, zone)| EndpointSpec {
        tags: vec![("zone".to_string(), zone.to_string())],
        ..EndpointSpec::new(&s.addr)
    });
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("flaky", endpoints),
    )
    .unwrap();
    let runtime = rt();
    let calls = |n: u32| calls_per_server(&runtime, &client, &servers, n);
    // Healthy: every call stays in the zone, smoothly split between its two endpoints.
    assert_eq!(calls(400), [200, 200, 0, 0]);
    // Both local endpoints at half weight: health 0.5 < min-healthy 0.7, so 1 − 0.5/0.7 ≈
    // 28.6% of the calls go to the other zone (1,000 calls: σ ≈ 14, tolerance over 4σ).
    client.set_warmups(&[
        (servers[0].addr.clone(), 500),
        (servers[1].addr.clone(), 500),
    ]);
    let degraded = calls(1_000);
    let remote = degraded[2] + degraded[3];
    assert!((220..=350).contains(&remote), "{degraded:?}");
    assert!(degraded.iter().all(|c| *c > 0), "{degraded:?}");
    // Recovered: everything comes back home.
    client.set_warmups(&[
        (servers[0].addr.clone(), 1000),
        (servers[1].addr.clone(), 1000),
    ]);
    assert_eq!(calls(400), [200, 200, 0, 0]);
}
