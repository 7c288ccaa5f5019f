//! The `condition` router (plugins/router-condition) through the real host and component:
//! gray release by caller application and by caller address, parameter routing and
//! version routing, each counted over a batch of requests; then end to end through a
//! client and real providers on loopback, where the route memo is keyed by exactly the
//! parts the rules read.

use std::collections::BTreeMap;

use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::kinds::router::{RouterPlugin, TagReads};
use axle::plugin::{LoadedPlugin, Plugin};
use axle::spi::{Endpoint, EndpointTable, RouteRequest};
use axle_host_tests::{manifest, ServeProcess, TestHost};

fn load(t: &TestHost, rules: &[&str], force: bool) -> Result<LoadedPlugin, String> {
    let rules: Vec<String> = rules.iter().map(|r| format!("{r:?}")).collect();
    let config = format!(
        "[plugins.c.config]\nrules = [{}]\nforce = {force}",
        rules.join(", ")
    );
    t.load(&manifest("c", "router", "builtin:condition", &config), "c")
        .map_err(|e| e.to_string())
}

fn router(p: &LoadedPlugin) -> &RouterPlugin {
    match &p.plugin {
        Plugin::Router(r) => r,
        _ => panic!("not a router"),
    }
}

/// Eight endpoints: 0-3 `version=1.x` (0 and 1 `lane=canary`), 4-7 `version=2.x`
/// (4 `group=gold`, 5 `zone=eu-1`), at 10.0.0.<id>:7300.
fn table() -> EndpointTable {
    EndpointTable::new(
        1,
        (0..8u32)
            .map(|id| {
                let mut tags = vec![(
                    "version".to_string(),
                    format!("{}.{id}", if id < 4 { 1 } else { 2 }),
                )];
                match id {
                    0 | 1 => tags.push(("lane".into(), "canary".into())),
                    4 => tags.push(("group".into(), "gold".into())),
                    5 => tags.push(("zone".into(), "eu-1".into())),
                    _ => {}
                }
                Endpoint {
                    id,
                    address: format!("10.0.0.{id}:7300"),
                    weight: 100,
                    tags,
                }
            })
            .collect(),
    )
}

const ALL: [u32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// Routes `requests` and counts how often each endpoint was left as a candidate.
fn counts(r: &RouterPlugin, requests: &[RouteRequest]) -> [u32; 8] {
    let mut counts = [0u32; 8];
    for request in requests {
        let routed = r.route(&ALL, request);
        assert!(routed.by_plugin, "the plugin answered");
        for id in routed.endpoints {
            counts[id as usize] += 1;
        }
    }
    counts
}

#[test]
fn gray_release_by_caller_application() {
    let t = TestHost::new();
    let p = load(
        &t,
        &["app = billing & method = get* => lane = canary"],
        false,
    )
    .unwrap();
    let r = router(&p);
    r.endpoints_changed(&table());
    assert!(r.reads().consumer_app && r.reads().method && !r.reads().caller_address);
    // 100 requests: 30 from billing calling get*, 20 from billing calling put, 50 from web.
    let request = |app: &str, method: &str| RouteRequest {
        service: "orders".into(),
        method: method.into(),
        consumer_app: app.into(),
        ..RouteRequest::default()
    };
    let mut requests = vec![request("billing", "getOrder"); 30];
    requests.extend(vec![request("billing", "put"); 20]);
    requests.extend(vec![request("web", "getOrder"); 50]);
    let c = counts(r, &requests);
    assert_eq!(c[0], 100, "canary endpoints: every request may reach them");
    assert_eq!(c[2], 70, "the rest: all but the 30 gray requests ({c:?})");
    assert_eq!(c[7], 70, "{c:?}");
}

#[test]
fn gray_release_by_caller_address() {
    let t = TestHost::new();
    let p = load(
        &t,
        &["address = 192.168.0.0/16, fd00::/8 => zone = eu-1"],
        false,
    )
    .unwrap();
    let r = router(&p);
    r.endpoints_changed(&table());
    assert!(r.reads().caller_address && !r.reads().consumer_app);
    let from = |address: &str| RouteRequest {
        caller_address: address.into(),
        ..RouteRequest::default()
    };
    let mut requests = vec![from("192.168.7.1"); 40];
    requests.extend(vec![from("fd12::9"); 10]);
    requests.extend(vec![from("10.1.1.1"); 25]);
    requests.extend(vec![from(""); 25]);
    let c = counts(r, &requests);
    assert_eq!(c[5], 100, "eu-1 is reachable from everywhere ({c:?})");
    assert_eq!(c[0], 50, "the 50 gray callers reach only eu-1 ({c:?})");
}

#[test]
fn parameter_routing_by_request_field() {
    let t = TestHost::new();
    let p = load(
        &t,
        &[
            "field:user.tier = gold => group = gold",
            "field:order.amount = 1000..* => lane = canary",
        ],
        false,
    )
    .unwrap();
    let r = router(&p);
    r.endpoints_changed(&table());
    assert_eq!(r.reads().fields, ["user.tier", "order.amount"]);
    assert_eq!(r.reads().tags, TagReads::None);
    let with = |fields: &[(&str, &str)]| RouteRequest {
        fields: fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..RouteRequest::default()
    };
    // 10 gold users, 20 big orders (one of them 1000 exactly), 30 small, 40 with neither.
    let mut requests = vec![with(&[("user.tier", "gold")]); 10];
    requests.extend(vec![with(&[("order.amount", "2500")]); 19]);
    requests.push(with(&[("order.amount", "1000")]));
    requests.extend(vec![with(&[("order.amount", "999.5")]); 30]);
    requests.extend(vec![with(&[]); 40]);
    let c = counts(r, &requests);
    assert_eq!(
        c[4], 80,
        "gold: every request but the 20 big orders ({c:?})"
    );
    assert_eq!(
        c[0], 90,
        "canary: every request but the 10 gold ones ({c:?})"
    );
    assert_eq!(c[7], 70, "others: the 70 neither rule caught ({c:?})");
}

#[test]
fn version_routing_force_and_blocks() {
    let t = TestHost::new();
    let p = load(
        &t,
        &[
            "tag:lane = blue => lane = blue",
            "app = retired =>",
            "=> version = 2.*",
        ],
        false,
    )
    .unwrap();
    let r = router(&p);
    r.endpoints_changed(&table());
    assert_eq!(r.reads().tags, TagReads::Keys(vec!["lane".into()]));
    let request = |lane: &str, app: &str| RouteRequest {
        tags: vec![("lane".into(), lane.into())],
        consumer_app: app.into(),
        ..RouteRequest::default()
    };
    let c = counts(r, &vec![request("blue", "web"); 50]);
    assert_eq!(
        c,
        [0, 0, 0, 0, 50, 50, 50, 50],
        "no blue endpoint: the rule is skipped and the version rule decides"
    );
    assert!(r.route(&ALL, &request("x", "retired")).endpoints.is_empty());

    let p = load(&t, &["tag:lane = blue => lane = blue"], true).unwrap();
    let forced = router(&p);
    forced.endpoints_changed(&table());
    assert!(forced
        .route(&ALL, &request("blue", ""))
        .endpoints
        .is_empty());
    assert_eq!(forced.route(&ALL, &request("canary", "")).endpoints, ALL);
}

#[test]
fn bad_rules_do_not_load_and_say_where() {
    let t = TestHost::new();
    let e = load(
        &t,
        &["app = a => lane = x", "method ~ get => lane = y"],
        false,
    )
    .err()
    .expect("refused");
    assert!(
        e.contains("rule 2 (`method ~ get => lane = y`), at byte 0"),
        "{e}"
    );
    let e = load(&t, &["address = 10.0.0.0/99 => lane = x"], false)
        .err()
        .expect("refused");
    assert!(e.contains("at byte 10") && e.contains("10.0.0.0/99"), "{e}");
}

/// A client of three loopback providers (`group=gold`, `version=1.0`, `version=2.0`)
/// routed by the condition router, with typed calls: fields come from the value before
/// encoding, the caller's address is the loopback one, and the memo holds one shape per
/// value of the declared parts only.
#[test]
fn a_client_routes_typed_calls_by_field_address_and_version() {
    let providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let tagged = |i: usize, k: &str, v: &str| EndpointSpec {
        tags: vec![(k.to_string(), v.to_string())],
        ..EndpointSpec::new(providers[i].addr.clone())
    };
    let endpoints = vec![
        tagged(0, "group", "gold"),
        tagged(1, "version", "1.0"),
        tagged(2, "version", "2.0"),
    ];
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let spec = m
        .plugins
        .get_mut("condition")
        .expect("condition in the defaults");
    spec.timeout_ms = 1000;
    spec.config.insert(
        "rules".into(),
        toml::Value::Array(
            [
                "field:user.tier = gold => group = gold",
                "address = 127.0.0.0/8 & tag:lane = old => version = 1.*",
                "=> version = 2.*",
            ]
            .iter()
            .map(|r| toml::Value::String(r.to_string()))
            .collect(),
        ),
    );
    m.services.entry("echo".into()).or_default().routers = Some(vec!["condition".into()]);
    let host = axle::plugin::PluginHost::new(None).expect("host");
    let client = axle::client::Client::new(
        &host,
        axle::client::ClientConfig::new(m).endpoints("echo", endpoints),
    )
    .expect("client");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let route_calls = || axle_host_tests::plugin_stats(&client, "condition").calls;
    let before = route_calls();
    let mut by_address: BTreeMap<String, u32> = BTreeMap::new();
    rt.block_on(async {
        for i in 0..120u32 {
            // 30 gold users (i % 4 == 0), 30 callers in the old lane (i % 4 == 1), 60
            // others; tiers t0..t4 and a different id on every call.
            let tier = match i % 4 {
                0 => "gold".to_string(),
                _ => format!("t{}", i % 5),
            };
            let lane = if i % 4 == 1 { "old" } else { "new" };
            let options = axle::client::CallOptions::default().tag("lane", lane);
            let body = serde_json::json!({"user": {"tier": tier, "id": i}});
            let answer = client
                .call_detailed::<_, serde_json::Value>("echo", "say", &body, &options)
                .await
                .expect("call");
            assert_eq!(answer.value, body);
            let id = answer.endpoint.expect("an endpoint");
            let address = client
                .endpoints()
                .into_iter()
                .find(|e| e.id == id)
                .map(|e| e.address)
                .expect("a known endpoint");
            *by_address.entry(address).or_default() += 1;
        }
    });
    let count = |i: usize| by_address.get(&providers[i].addr).copied().unwrap_or(0);
    assert_eq!(
        [count(0), count(1), count(2)],
        [30, 30, 60],
        "gold users, the old lane from loopback, the rest: {by_address:?}"
    );
    // Shapes are (tier, lane, address): gold/new, t0..t4/old, t0..t4/new = 11; the id and
    // the method are no part of them.
    let services = client.services();
    let echo = services.iter().find(|s| s.service == "echo").expect("echo");
    let shapes: usize = echo.policies.iter().map(|p| p.route_shapes).sum();
    assert!((1..=11).contains(&shapes), "{shapes} memoised shapes");
    let routed = route_calls() - before;
    // Once per shape (again only if the rotation changed under the calls), not per call.
    assert!(
        (11..=33).contains(&routed),
        "the router ran {routed} times for 120 calls of 11 shapes"
    );
}
