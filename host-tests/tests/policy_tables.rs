//! Policy keyed by declared methods only, on both sides, with real `axle serve`
//! processes: method names a caller invents share one entry per service, so they neither
//! lift a declared method's limits on the provider nor grow either side's tables.
//! Assertions are on answers and counts; the rates printed are for people, not asserted.

use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client, ClientConfig, PolicyView};
use axle::manifest::{EndpointSpec, Manifest};
use axle_host_tests::{rt, ServeProcess, TestHost};
use bytes::Bytes;
use serde_json::Value;

/// The embedded manifest and `extra` tables, written to `dir` (for `axle serve`).
fn provider_manifest(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let text = format!("{}\n{extra}\n", axle::manifest::defaults::EMBEDDED_MANIFEST);
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// `axle stats --admin ADDR --json`: the provider's method rows.
fn provider_methods(server: &ServeProcess) -> Vec<Value> {
    let admin = server.admin.as_deref().expect("--admin prints its address");
    let report = axle_host_tests::admin_stats(admin);
    let servers = report["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 1, "{report}");
    servers[0]["methods"].as_array().expect("methods").clone()
}

fn row<'a>(methods: &'a [Value], service: &str, method: &str) -> &'a Value {
    methods
        .iter()
        .find(|m| m["service"] == service && m["method"] == method)
        .unwrap_or(&Value::Null)
}

/// `names` raw `echo` calls, method `{prefix}{i}` for i in `names` (or `prefix` alone
/// for every call when `distinct` is false), from `callers` tasks: (answered, failed,
/// time taken).
fn drive(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    callers: u64,
    names: u64,
    prefix: &'static str,
    distinct: bool,
) -> (u64, u64, Duration) {
    let started = Instant::now();
    let (ok, failed) = runtime.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|caller| {
                let client = client.clone();
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0u64, 0u64);
                    let options = CallOptions::default();
                    for i in (caller..names).step_by(callers as usize) {
                        let method = if distinct {
                            format!("{prefix}{i}")
                        } else {
                            prefix.to_string()
                        };
                        let body = Bytes::from_static(b"hi");
                        match client.call_raw("echo", &method, body, &options).await {
                            Ok(reply) if reply.payload[..] == b"hi"[..] => ok += 1,
                            Ok(reply) => panic!("echo answered {:?}", reply.payload),
                            Err(e) => {
                                if failed < 3 {
                                    eprintln!("{method}: {e}");
                                }
                                failed += 1;
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let mut totals = (0, 0);
        for t in tasks {
            let (ok, failed) = t.await.expect("a calling task finished");
            totals.0 += ok;
            totals.1 += failed;
        }
        totals
    });
    (ok, failed, started.elapsed())
}

#[test]
fn five_thousand_invented_names_do_not_lift_a_declared_methods_limits() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = provider_manifest(
        dir.path(),
        "[services.echo.methods.slow]\ninternal-only = true\nmax-concurrent = 1",
    );
    let server = ServeProcess::start_with_manifest(Some(&manifest), &["--admin", "127.0.0.1:0"]);
    let t = TestHost::new();
    let client = axle_host_tests::client_for(
        &t.host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(&server.addr)],
    );
    let runtime = rt();
    let (ok, failed, _) = drive(&runtime, &client, 16, 5_000, "m", true);
    assert_eq!((ok, failed), (5_000, 0));

    // Marked external by the caller (and, where the provider's `[trust]` does not name
    // this loopback caller, external whatever it says): the declared method still
    // refuses, while an invented name served by the same catch-all handler answers.
    let outside = CallOptions {
        external: true,
        ..CallOptions::default()
    };
    runtime.block_on(async {
        let err = client
            .call_raw("echo", "slow", Bytes::from_static(b"hi"), &outside)
            .await
            .unwrap_err();
        assert_eq!(err.class(), "forbidden", "{err}");
        let reply = client
            .call_raw("echo", "m5000", Bytes::from_static(b"hi"), &outside)
            .await
            .expect("an undeclared name has the service tier: not internal-only");
        assert_eq!(reply.payload, Bytes::from_static(b"hi"));
    });

    let methods = provider_methods(&server);
    let names: Vec<String> = methods
        .iter()
        .map(|m| format!("{}/{}", m["service"], m["method"]).replace('"', ""))
        .collect();
    assert_eq!(names, ["echo/*", "echo/slow"], "bounded: {names:?}");
    let shared = row(&methods, "echo", "*");
    assert_eq!(shared["requests"], 5_001, "{shared}");
    assert_eq!(shared["ok"], 5_001, "{shared}");
    let slow = row(&methods, "echo", "slow");
    assert_eq!(slow["requests"], 1, "{slow}");
    assert_eq!(slow["handled"], 0, "{slow}");
    assert_eq!(
        slow["errors"],
        serde_json::json!({ "forbidden": 1 }),
        "{slow}"
    );
}

#[test]
fn a_caller_asked_for_100_000_names_keeps_one_policy_for_them() {
    let server = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let t = TestHost::new();
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    m.method_governance.insert(
        ("echo".into(), "ping".into()),
        toml::from_str("timeout-ms = 2000").unwrap(),
    );
    // The default selector, with room for a loaded test machine.
    let selector = m.slots.selector.clone().unwrap_or_default();
    if let Some(p) = m.plugins.get_mut(&selector) {
        p.timeout_ms = 1000;
    }
    // The embedded manifest's `tag` router is in the path: every call reads the memo.
    assert!(!m.slots.routers.as_deref().unwrap_or_default().is_empty());
    let client = Client::new(
        &t.host,
        ClientConfig::new(m).endpoints("echo", [EndpointSpec::new(&server.addr)]),
    )
    .expect("client");
    let policies = |c: &Client| -> Vec<PolicyView> {
        let services = c.services();
        let echo = services.iter().find(|s| s.service == "echo").expect("echo");
        echo.policies.clone()
    };
    let names = |p: &[PolicyView]| p.iter().map(|p| p.method.clone()).collect::<Vec<_>>();
    let before = policies(&client);
    assert_eq!(
        names(&before),
        ["ping", "*"],
        "resolved when the client is built"
    );

    let runtime = rt();
    let (ok, failed, one_name) = drive(&runtime, &client, 32, 20_000, "same", false);
    assert_eq!((ok, failed), (20_000, 0));
    let (ok, failed, distinct) = drive(&runtime, &client, 32, 100_000, "n", true);
    assert_eq!((ok, failed), (100_000, 0));
    eprintln!(
        "one name: {:.0} calls/s; 100,000 distinct names: {:.0} calls/s",
        20_000.0 / one_name.as_secs_f64(),
        100_000.0 / distinct.as_secs_f64()
    );

    let after = policies(&client);
    assert_eq!(names(&after), ["ping", "*"], "no policy per invented name");
    let shared = after.iter().find(|p| p.method == "*").unwrap();
    assert_eq!(shared.route_shapes, 1, "one request shape, one memo entry");
    assert_eq!(shared.breaker, "closed");
    let ping = after.iter().find(|p| p.method == "ping").unwrap();
    assert_eq!(ping.route_shapes, 0, "ping was never called");

    // The provider counted them on one entry too.
    let methods = provider_methods(&server);
    assert_eq!(methods.len(), 1, "{methods:?}");
    assert_eq!(row(&methods, "echo", "*")["requests"], 120_000);
}
