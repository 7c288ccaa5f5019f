//! Routes memoised beside the rotation, on real calls against scripted endpoints: one
//! route per request shape, none carried into a new rotation.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::{call, client, host, Fake, Mode};
use crate::{CallError, CallOptions, Client};
use axle_manifest::EndpointSpec;

/// The routes `c` memoised after `calls` of each of `shapes` to `svc`, all within one
/// `Current` (where they are kept): made again if health replaced the rotation meanwhile
/// (its monitor runs beside, and a new rotation memoises anew), up to 50 times.
async fn memoised(c: &Client, shapes: &[&CallOptions], calls: usize) -> usize {
    let current = || Arc::clone(&*c.state.services["svc"].read());
    for _ in 0..50 {
        let before = current();
        for options in shapes {
            for _ in 0..calls {
                call(c, options).await.unwrap();
            }
        }
        let memoised = route_shapes(c);
        if Arc::ptr_eq(&before, &current()) {
            return memoised;
        }
    }
    panic!("the service's rotation never held still for {calls} calls a shape");
}

fn route_shapes(c: &Client) -> usize {
    let policies = &c.services()[0].policies;
    policies.iter().map(|p| p.route_shapes).sum()
}

/// Routes are memoised beside the rotation they were made from: a shape's calls after
/// the first borrow its route (the routers run once), and a new rotation starts with no
/// routes memoised, so no call is routed by an answer made from the endpoints before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_are_memoised_per_rotation() {
    let (host, _dir) = host();
    let (stable, canary) = (Fake::start(Mode::Echo).await, Fake::start(Mode::Echo).await);
    let tagged = |addr: &str, lane: &str| EndpointSpec {
        tags: vec![("lane".into(), lane.into())],
        ..EndpointSpec::new(addr)
    };
    let endpoints = vec![
        tagged(&stable.addr, "stable"),
        tagged(&canary.addr, "canary"),
    ];
    let c = client(&host, endpoints.clone(), "");
    let to_canary = &CallOptions {
        tags: vec![("lane".into(), "canary".into())],
        ..CallOptions::default()
    };
    let untagged = &CallOptions::default();
    assert_eq!(
        memoised(&c, &[to_canary], 10).await,
        1,
        "one shape, one route"
    );
    assert_eq!(
        stable.requests.load(Relaxed),
        0,
        "the lane's calls reach it alone"
    );
    assert_eq!(memoised(&c, &[to_canary, untagged], 10).await, 2);
    assert!(
        stable.requests.load(Relaxed) > 0,
        "no tags: the whole rotation"
    );

    // A new rotation: the canary leaves, and nothing routes by the old answer.
    let reached = canary.requests.load(Relaxed);
    c.set_endpoints("svc", vec![endpoints[0].clone()]).unwrap();
    assert_eq!(route_shapes(&c), 0, "a new rotation memoises anew");
    let gone = call(&c, to_canary).await;
    assert!(
        matches!(gone, Err(CallError::NoEndpoint { .. })),
        "routed by an old answer: {gone:?}"
    );
    assert_eq!(memoised(&c, &[untagged], 1).await, 1);
    assert_eq!(canary.requests.load(Relaxed), reached);
}
