//! Routes and weights as run-time rules (`axle rules`, docs/governance.md): two `axle
//! serve` providers registered in a real etcd (one tagged `lane=canary`) and a real `axle
//! gateway` following them. A pushed `[route]` moves every call to the canary, a pushed
//! `[weights]` reshapes the shares, and a bad route — refused by `axle rules put`, and by
//! the gateway when written around the command — leaves the last good rule in force.

use std::process::Output;
use std::time::Duration;

use axle_host_tests::admin_stats;
use axle_host_tests::etcd::{axle_rules, put_rule, put_rule_raw, wait_until, Etcd, Provider};
use axle_host_tests::http::{post, AxleProcess};

/// How long a rule may take to show in calls (the promise is about a second).
const RULE_WAIT: Duration = Duration::from_secs(10);

/// `axle rules COMMAND echo --registry URL`, with `stdin` piped in.
fn rules(etcd: &Etcd, command: &str, stdin: &str) -> Output {
    axle_rules(etcd, command, "echo", &[], stdin)
}

/// `axle rules put echo` of `text`; the revision it printed.
fn put(etcd: &Etcd, text: &str) -> i64 {
    put_rule(etcd, "echo", text)
}

/// The gateway client's echo section and its rule status.
fn echo_stats(admin: &str) -> (serde_json::Value, serde_json::Value) {
    let stats = admin_stats(admin);
    let client = &stats["clients"][0];
    let echo = client["services"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["service"] == "echo"))
        .cloned()
        .unwrap_or_else(|| panic!("no echo in {stats}"));
    let rule = client["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["service"] == "echo"))
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    (echo, rule)
}

/// Calls the gateway made to each of `addresses` so far.
fn calls_to(admin: &str, addresses: [&str; 2]) -> [u64; 2] {
    let (echo, _) = echo_stats(admin);
    addresses.map(|a| {
        echo["endpoints"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["address"] == a))
            .and_then(|e| e["calls"].as_u64())
            .unwrap_or(0)
    })
}

/// Makes `n` calls through the gateway; how many reached each provider.
fn drive(gateway: &str, admin: &str, addresses: [&str; 2], n: usize) -> [u64; 2] {
    let before = calls_to(admin, addresses);
    for i in 0..n {
        let answer = post(gateway, "/echo/say", &[], &format!("{{\"n\": {i}}}"));
        assert_eq!(answer.status, 200, "call {i}: {}", answer.status);
    }
    let after = calls_to(admin, addresses);
    [after[0] - before[0], after[1] - before[1]]
}

#[test]
fn pushed_routes_and_weights_move_traffic_and_bad_routes_are_refused() {
    let Some(etcd) = Etcd::start_or_skip("pushed_routes_and_weights_move_traffic...") else {
        return;
    };
    // No warm-up: shares follow the configured weights from the first call.
    let canary = Provider::start(&etcd.url(), &["--tag", "lane=canary", "--warmup-ms", "0"]);
    let stable = Provider::start(&etcd.url(), &["--warmup-ms", "0"]);
    let addresses = [canary.addr.as_str(), stable.addr.as_str()];
    let gateway = AxleProcess::start(&[
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--registry",
        &etcd.url(),
        "--admin",
        "127.0.0.1:0",
    ]);
    let admin = gateway
        .line_starting("admin on ", Duration::from_secs(10))
        .expect("the gateway prints its admin address");
    let g = gateway.addr.as_str();

    // No rule: both providers take calls.
    wait_until(RULE_WAIT, || {
        drive(g, &admin, addresses, 20).iter().all(|n| *n > 0)
    })
    .expect("without a rule both providers take calls");

    // A pushed route: every call goes to the canary, within the wait.
    let route = put(&etcd, "[route]\nrules = [\"=> lane = canary\"]\n");
    let took = wait_until(RULE_WAIT, || drive(g, &admin, addresses, 10) == [10, 0])
        .expect("with the route every call reaches the canary");
    eprintln!("the route showed in calls after {took:?}");
    let counts = drive(g, &admin, addresses, 50);
    assert_eq!(counts, [50, 0], "all 50 calls on the canary");
    assert_eq!(echo_stats(&admin).1["revision"], route);

    // Pushed weights (no route any more): the stable provider takes three shares of four.
    let weights = format!(
        "[weights]\n{:?} = 100\n{:?} = 300\n",
        canary.addr, stable.addr
    );
    let weighted = put(&etcd, &weights);
    wait_until(RULE_WAIT, || {
        echo_stats(&admin).1["revision"] == weighted
            && drive(g, &admin, addresses, 8).iter().all(|n| *n > 0)
    })
    .expect("the weights rule is in force");
    let counts = drive(g, &admin, addresses, 400);
    let share = counts[1] as f64 / 400.0;
    assert!(
        (share - 0.75).abs() <= 0.08,
        "stable's share {share:.3} ({counts:?}), weight share 0.75"
    );

    // A bad route: `axle rules put` loads it, and refuses it naming the rule and where.
    let bad = "[route]\nrules = [\"app billing => lane = canary\"]\n";
    let out = rules(&etcd, "put", bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad route is refused");
    assert!(stderr.contains("rule 1 (`app billing"), "{stderr}");

    // Written around the command: the gateway refuses it and keeps the weights.
    let bad_revision = put_rule_raw(&etcd, "echo", bad);
    wait_until(RULE_WAIT, || {
        echo_stats(&admin).1["refused"]["revision"] == bad_revision
    })
    .expect("the gateway reports the refused revision");
    let (_, status) = echo_stats(&admin);
    assert_eq!(
        status["revision"], weighted,
        "the last good rule stays: {status}"
    );
    let error = status["refused"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("rule 1"), "{status}");
    let counts = drive(g, &admin, addresses, 200);
    let share = counts[1] as f64 / 200.0;
    assert!(
        (share - 0.75).abs() <= 0.1,
        "the weights stay in force: stable's share {share:.3} ({counts:?})"
    );
}
