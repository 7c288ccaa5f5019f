//! A service's limits as a run-time rule (`[limits]` in `axle rules`, docs/governance.md):
//! a real `axle serve` registered in a real etcd follows its services' rules, lays their
//! limits into its limiter's config and swaps the limiter. A pushed limit is followed
//! within a bounded wait; `axle rules put` refuses a malformed one; a value the limiter
//! refuses, written to etcd around the command, is refused by the provider, which keeps
//! the limits in force; a rule without limits lifts them.

use std::process::Output;
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle::plugin::PluginHost;
use axle_host_tests::etcd::{axle_rules, put_rule_raw, Etcd, Provider};
use axle_host_tests::{admin_stats, client_for, rt};

/// How long a rule may take to show (the promise is about a second).
const RULE_WAIT: Duration = Duration::from_secs(10);

/// `axle rules put echo --registry URL` of `text`.
fn put(etcd: &Etcd, text: &str) -> Output {
    axle_rules(etcd, "put", "echo", &[], text)
}

/// Puts `text` as `echo`'s rule, which `axle rules put` must accept and the provider
/// must then apply to its limits.
fn put_applied(etcd: &Etcd, provider: &Provider, text: &str) {
    let out = put(etcd, text);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = rule_line(provider);
    assert!(line.contains("limits applied"), "{line}");
}

/// The provider's next stdout line about `echo`'s rule, within [`RULE_WAIT`].
fn rule_line(p: &Provider) -> String {
    let until = Instant::now() + RULE_WAIT;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match p.lines.recv_timeout(left) {
            Ok(line) if line.starts_with("rule of echo: ") => return line,
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    panic!("the provider said nothing about echo's rule within {RULE_WAIT:?}");
}

/// Of `n` calls to `echo` in a row, how many were admitted.
fn admitted(rt: &tokio::runtime::Runtime, client: &Client, n: usize) -> usize {
    rt.block_on(async {
        let mut ok = 0;
        for _ in 0..n {
            let options = CallOptions::timeout(Duration::from_secs(2));
            let body = bytes::Bytes::from_static(b"hi");
            if client.call_raw("echo", "say", body, &options).await.is_ok() {
                ok += 1;
            }
        }
        ok
    })
}

#[test]
fn a_pushed_limit_is_followed_a_bad_one_refused_and_the_last_good_kept() {
    let Some(etcd) = Etcd::start_or_skip("a_pushed_limit_is_followed_...") else {
        return;
    };
    let rt = rt();
    let provider = Provider::start(&etcd.url(), &["--admin", "127.0.0.1:0"]);
    let admin = provider
        .admin
        .clone()
        .expect("the provider's admin address");
    let host = PluginHost::new(None).unwrap();
    let client = {
        let _in = rt.enter();
        client_for(
            &host,
            "echo",
            "round-robin",
            vec![EndpointSpec::new(&provider.addr)],
        )
    };
    assert_eq!(
        admitted(&rt, &client, 20),
        20,
        "the manifest's generous limit"
    );

    // Half a request per second, a burst of 3: the next 20 calls see the burst.
    put_applied(&etcd, &provider, "[limits]\nrate = 0.5\nburst = 3\n");
    let n = admitted(&rt, &client, 20);
    assert!(
        (3..=4).contains(&n),
        "{n} of 20 admitted under a burst of 3"
    );

    // Malformed: `axle rules put` refuses it, naming the key, and stores nothing.
    let out = put(&etcd, "[limits]\nrate = [1, 2]\n");
    assert!(!out.status.success(), "a malformed limit is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("limits.rate"), "{stderr}");

    // A value only the limiter can judge, written around the command: the provider's
    // limiter refuses it at load, and the limits in force stay.
    put_rule_raw(&etcd, "echo", "[limits]\nrate = 0\n");
    let line = rule_line(&provider);
    assert!(line.contains("refused revision"), "{line}");
    assert!(line.contains("rate"), "the limiter's reason: {line}");
    let n = admitted(&rt, &client, 20);
    assert!(
        n <= 4,
        "{n} of 20 admitted: the last good limit (burst 3) stays"
    );
    // `axle stats --admin` shows it too: the revision in force, the refused one and why.
    let stats = admin_stats(&admin);
    let echo = stats["servers"][0]["rules"]
        .as_array()
        .expect("the server's rules")
        .iter()
        .find(|r| r["service"] == "echo")
        .unwrap_or_else(|| panic!("no rule status for echo: {stats}"))
        .clone();
    let refused = echo["refused"]["revision"]
        .as_i64()
        .expect("a refused revision");
    assert!(
        echo["revision"].as_i64().is_some_and(|r| r < refused),
        "the good revision stays in force: {echo}"
    );
    let why = echo["refused"]["error"].as_str().unwrap_or_default();
    assert!(why.contains("rate"), "the limiter's reason: {echo}");

    // A rule without limits lifts them: the manifest's limit again.
    put_applied(&etcd, &provider, "[governance]\nretries = 1\n");
    assert_eq!(admitted(&rt, &client, 20), 20, "no rule limit any more");
}
