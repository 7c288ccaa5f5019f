//! Run-time rules through etcd (`axle rules`, docs/governance.md): two `axle serve`
//! providers registered in a real etcd (one good, one failing every call to `flaky`) and a
//! real `axle gateway` following them. A rule changes what calls to `flaky` do within a
//! bounded wait; `axle rules put` refuses a bad rule; a bad rule written to etcd around
//! the command is refused by the gateway, which keeps the last good rule and reports the
//! refusal in its stats; a rollback brings the earlier behaviour back.

use std::process::{Command, Output};
use std::time::Duration;

use axle_host_tests::etcd::{axle_rules, put_rule, put_rule_raw, wait_until, Etcd, Provider};
use axle_host_tests::http::{post, AxleProcess};
use axle_host_tests::{admin_stats, axle_bin};

/// How long a rule may take to show in calls (the promise is about a second).
const RULE_WAIT: Duration = Duration::from_secs(10);

/// Retries make every call succeed: a call that reached the failing provider is retried
/// on the good one.
const RETRYING: &str = "[governance]\nidempotent = true\n";
/// No retries, and the method's breaker opens for an hour on the first failure: once a
/// call has reached the failing provider, every call fails. (A timeout would not do
/// here: the gateway gives each call its own deadline, which wins over `timeout-ms`.)
const TRIPPING: &str = "[governance]\nbreaker-consecutive-failures = 1\nbreak-ms = 3600000\n";
/// Over the manifest's bound (0..=10).
const BAD: &str = "[governance]\nretries = 99\n";

/// `axle rules COMMAND flaky ARGS... --registry URL`, with `stdin` piped in.
fn rules(etcd: &Etcd, command: &str, args: &[&str], stdin: &str) -> Output {
    axle_rules(etcd, command, "flaky", args, stdin)
}

/// `axle rules put flaky` of `text`; the revision it printed.
fn put(etcd: &Etcd, text: &str) -> i64 {
    put_rule(etcd, "flaky", text)
}

/// Whether `n` calls to flaky in a row all succeed (`true`) or all fail (`false`).
fn calls_all(gateway: &str, n: usize, succeed: bool) -> bool {
    (0..n).all(|_| (post(gateway, "/flaky/say", &[], r#"{"n": 1}"#).status == 200) == succeed)
}

/// The gateway client's rule status for flaky, from its admin endpoint.
fn rule_status(admin: &str) -> serde_json::Value {
    let stats = admin_stats(admin);
    stats["clients"][0]["rules"]
        .as_array()
        .expect("the client's stats have a rules section")
        .iter()
        .find(|r| r["service"] == "flaky")
        .cloned()
        .unwrap_or_else(|| panic!("no rule status for flaky: {stats}"))
}

#[test]
fn rules_change_calls_at_run_time_bad_ones_are_refused_and_rollback_restores() {
    let Some(etcd) = Etcd::start_or_skip("rules_change_calls_at_run_time_...") else {
        return;
    };
    let _good = Provider::start(&etcd.url(), &[]);
    let _failing = Provider::start(&etcd.url(), &["--flaky-fail-rate", "1"]);
    let retrying = put(&etcd, RETRYING);

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
    // The rule in force at start is applied before the gateway listens.
    assert_eq!(rule_status(&admin)["revision"], retrying);
    wait_until(RULE_WAIT, || calls_all(g, 6, true))
        .expect("with retries every call to flaky succeeds");

    // A tripping breaker: every call now fails, within the wait.
    let tripping = put(&etcd, TRIPPING);
    let took = wait_until(RULE_WAIT, || calls_all(g, 4, false))
        .expect("with the tripping breaker every call to flaky fails");
    eprintln!("the new rule showed in calls after {took:?}");
    assert_eq!(rule_status(&admin)["revision"], tripping);

    // `axle rules put` refuses a bad rule, naming the key, and stores nothing.
    let out = rules(&etcd, "put", &[], BAD);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad rule is refused");
    assert!(
        stderr.contains("retries") && stderr.contains("99"),
        "{stderr}"
    );
    let got = rules(&etcd, "get", &[], "");
    let got = String::from_utf8_lossy(&got.stdout);
    assert!(
        got.starts_with(&format!("# revision {tripping}\n")),
        "{got}"
    );
    assert!(got.contains("break-ms = 3600000"), "{got}");

    // Written around the command: the gateway refuses it, keeps the last good rule and
    // says so in its stats.
    let bad = put_rule_raw(&etcd, "flaky", BAD);
    wait_until(RULE_WAIT, || {
        rule_status(&admin)["refused"]["revision"] == bad
    })
    .expect("the gateway reports the refused revision");
    let status = rule_status(&admin);
    assert_eq!(
        status["revision"], tripping,
        "the last good rule stays: {status}"
    );
    let error = status["refused"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("retries"), "{status}");
    assert!(
        calls_all(g, 3, false),
        "the 100 ms timeout is still in force"
    );
    let text = Command::new(axle_bin())
        .args(["stats", "--admin", &admin])
        .output()
        .expect("run axle stats");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("refused: revision {bad}")),
        "axle stats shows the refusal: {text}"
    );

    // The history lists every version; a rollback stores the first again, as a new one.
    let history = rules(&etcd, "history", &[], "");
    let history = String::from_utf8_lossy(&history.stdout);
    for rev in [retrying, tripping, bad] {
        assert!(history.contains(&format!(" {rev}  ")), "{rev} in {history}");
    }
    let out = rules(&etcd, "rollback", &[&retrying.to_string()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(RULE_WAIT, || calls_all(g, 6, true))
        .expect("after the rollback every call to flaky succeeds again");
    let status = rule_status(&admin);
    assert!(status["revision"].as_i64() > Some(bad), "{status}");
    assert!(status["refused"].is_null(), "{status}");
}
