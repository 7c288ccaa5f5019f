//! Interceptors through real `axle serve` processes and the public client: the shipped
//! `allow-apps` and `tag-map`, chain order, a server-after refusal, the payload grant, a
//! trapping interceptor's safe default, and the memo — each asserted with counters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use axle::client::{CallError, CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle_host_tests::{admin_stats, built_component, rt, run_axle, text, ServeProcess};

const FIXTURE: &str = "axle_fixture_hostile_interceptor";

/// The embedded manifest with `slots` added to its `[slots]` table and `extra` tables
/// after it, written to `dir`.
fn write_manifest(dir: &Path, slots: &str, extra: &str) -> PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base.replacen("[slots]\n", &format!("[slots]\n{slots}\n"), 1) + extra;
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// `[plugins.NAME]` of the hostile fixture with `config` (TOML lines) and entry keys.
fn fixture(name: &str, entry: &str, config: &str) -> String {
    format!(
        "\n[plugins.{name}]\nkind = \"interceptor\"\ncomponent = {:?}\ntimeout-ms = 1000\n{entry}\n[plugins.{name}.config]\n{config}\n",
        built_component(FIXTURE).display().to_string()
    )
}

fn provider(dir: &Path, slots: &str, extra: &str) -> ServeProcess {
    let manifest = write_manifest(dir, slots, extra);
    ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_LOG", "error,plugin=off")],
    )
}

/// A client of `echo` at `provider` with the embedded manifest.
fn client_of(provider: &ServeProcess) -> Client {
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let host = PluginHost::new(None).expect("host");
    Client::new(
        &host,
        ClientConfig::new(m).endpoints("echo", vec![EndpointSpec::new(provider.addr.clone())]),
    )
    .expect("client")
}

fn as_app(app: &str) -> CallOptions {
    CallOptions {
        consumer_app: Some(app.to_string()),
        ..CallOptions::default()
    }
}

/// `n` raw echo calls as `options` on `rt` (one runtime per test: connections live on
/// it): the answers.
fn calls(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    n: usize,
    options: &CallOptions,
) -> Vec<Result<Vec<u8>, CallError>> {
    rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..n {
            let body = bytes::Bytes::from(format!("call {i}"));
            let answer = client.call_raw("echo", "say", body, options).await;
            out.push(answer.map(|r| r.payload.to_vec()));
        }
        out
    })
}

/// The provider's counters of interceptor `name` (its `intercept` object).
fn server_counts(provider: &ServeProcess, name: &str) -> serde_json::Value {
    let stats = admin_stats(provider.admin.as_deref().expect("admin"));
    let plugins = stats["servers"][0]["plugins"].as_array().expect("plugins");
    let row = plugins
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no counters for `{name}` in {plugins:?}"));
    row["intercept"].clone()
}

fn remote_class(r: &Result<Vec<u8>, CallError>) -> Option<String> {
    match r {
        Err(CallError::Remote { class, .. }) => Some(class.as_str().to_string()),
        _ => None,
    }
}

#[test]
fn allow_apps_refuses_a_denied_app_admits_an_allowed_one_and_memoises() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let p = provider(
        dir.path(),
        "server-interceptors = [\"gate\"]",
        "\n[plugins.gate]\nkind = \"interceptor\"\ncomponent = \"builtin:allow-apps\"\n\
         [plugins.gate.config]\nallow = [\"web\", \"billing-*\"]\n",
    );
    let client = client_of(&p);
    let allowed = calls(&rt, &client, 20, &as_app("billing-eu"));
    assert!(allowed.iter().all(Result::is_ok), "{allowed:?}");
    let denied = calls(&rt, &client, 10, &as_app("scraper"));
    for answer in &denied {
        assert_eq!(
            remote_class(answer).as_deref(),
            Some("forbidden"),
            "{answer:?}"
        );
        let Err(e) = answer else { unreachable!() };
        assert!(
            e.to_string().contains("`gate`") && e.to_string().contains("`scraper`"),
            "{e}"
        );
    }
    let unnamed = calls(&rt, &client, 1, &CallOptions::default());
    assert_eq!(remote_class(&unnamed[0]).as_deref(), Some("forbidden"));
    let c = server_counts(&p, "gate");
    assert_eq!(c["calls"], 31, "{c}");
    assert_eq!(c["passes"], 20, "{c}");
    assert_eq!(c["refusals"], 11, "{c}");
    assert_eq!(c["faults"], 0, "{c}");
    // Three shapes (two apps and none): each asked once, every other call from the memo.
    assert_eq!(c["memo_hits"], 28, "{c}");
    // The same counters in `axle stats` and on /metrics.
    let admin = p.admin.as_deref().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let table = text(&run_axle(&["stats", "--admin", admin], cache.path()).stdout);
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("gate ") && l.contains("28"))
        .unwrap_or_else(|| panic!("no interceptor row for `gate`:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, ["gate", "31", "20", "0", "11", "28", "0"], "{table}");
    let metrics = axle_host_tests::http::request(admin, "GET", "/metrics", &[], b"")
        .expect("GET /metrics")
        .body;
    let memo = metrics
        .lines()
        .find(|l| {
            l.starts_with("axle_interceptor_memo_hits_total{") && l.contains("plugin=\"gate\"")
        })
        .unwrap_or_else(|| panic!("no memo hits for `gate` on /metrics"));
    assert!(memo.ends_with(" 28"), "{memo}");
    assert!(
        metrics.contains("verdict=\"refuse\"} 11"),
        "refusals on /metrics"
    );
}

#[test]
fn tag_map_on_the_caller_routes_a_header_to_its_lane() {
    let providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let canary = providers[0].addr.clone();
    let endpoints: Vec<EndpointSpec> = providers
        .iter()
        .enumerate()
        .map(|(i, p)| EndpointSpec {
            tags: if i == 0 {
                vec![("lane".to_string(), "canary".to_string())]
            } else {
                Vec::new()
            },
            ..EndpointSpec::new(p.addr.clone())
        })
        .collect();
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    m.services
        .entry("echo".into())
        .or_default()
        .client_interceptors = Some(vec!["tag-map".into()]);
    let host = PluginHost::new(None).expect("host");
    let client =
        Client::new(&host, ClientConfig::new(m).endpoints("echo", endpoints)).expect("client");
    let header = CallOptions::default().tag("x-lane", "canary");
    let mut by_address: BTreeMap<String, u32> = BTreeMap::new();
    let mut plain: BTreeMap<String, u32> = BTreeMap::new();
    rt().block_on(async {
        for i in 0..60 {
            let body = serde_json::json!({ "i": i });
            let (options, counts) = if i % 2 == 0 {
                (&header, &mut by_address)
            } else {
                (&CallOptions::default(), &mut plain)
            };
            let answer = client
                .call_detailed::<_, serde_json::Value>("echo", "say", &body, options)
                .await
                .expect("call");
            let id = answer.endpoint.expect("an endpoint");
            let address = client
                .endpoints()
                .into_iter()
                .find(|e| e.id == id)
                .map(|e| e.address)
                .expect("a known endpoint");
            *counts.entry(address).or_default() += 1;
        }
    });
    assert_eq!(
        by_address,
        BTreeMap::from([(canary.clone(), 30)]),
        "every call with the header reached the canary lane only"
    );
    assert!(
        plain.len() > 1,
        "calls without it spread over the rotation: {plain:?}"
    );
    let (_, stats) = client
        .plugin_stats()
        .into_iter()
        .find(|(n, _)| n == "tag-map")
        .expect("tag-map counters");
    let c = stats.intercept.expect("an interceptor's counters");
    assert_eq!(
        (c.calls, c.tag_changes, c.passes, c.faults),
        (60, 30, 30, 0),
        "{c:?}"
    );
    assert_eq!(c.memo_hits, 58, "two tag sets, each asked once: {c:?}");
}

#[test]
fn a_refusal_ends_the_chain_and_a_server_after_refusal_replaces_the_answer() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "\n[plugins.first]\nkind = \"interceptor\"\ncomponent = \"builtin:allow-apps\"\n\
         [plugins.first.config]\ndeny = [\"batch\"]\n\
         \n[plugins.second]\nkind = \"interceptor\"\ncomponent = \"builtin:allow-apps\"\n\
         [plugins.second.config]\nallow = [\"*\"]\n{}",
        fixture(
            "after",
            "",
            "behaviour = \"refuse\"\nclass = \"business\"\npoints = [\"server-after\"]"
        )
    );
    let p = provider(
        dir.path(),
        "server-interceptors = [\"first\", \"second\", \"after\"]",
        &extra,
    );
    let client = client_of(&p);
    let refused = calls(&rt, &client, 5, &as_app("batch"));
    assert!(refused
        .iter()
        .all(|r| remote_class(r).as_deref() == Some("forbidden")));
    assert_eq!(server_counts(&p, "first")["refusals"], 5);
    assert_eq!(
        server_counts(&p, "second")["calls"],
        0,
        "the second interceptor is not asked once the first refused"
    );
    // Admitted by both, answered by the handler, then refused after it.
    let replaced = calls(&rt, &client, 4, &as_app("web"));
    for answer in &replaced {
        let Err(CallError::Remote { class, message, .. }) = answer else {
            panic!("the answer was not replaced: {answer:?}");
        };
        assert_eq!(class.as_str(), "business");
        assert!(
            message.contains("`after`") && message.contains("server-after"),
            "{message}"
        );
        assert!(
            message.contains("outcome ``"),
            "the handler had succeeded: {message}"
        );
    }
    // Only the admitted calls reach server-after: a call the chain refused before is
    // answered at once.
    let after = server_counts(&p, "after");
    assert_eq!(
        (after["calls"].as_u64(), after["refusals"].as_u64()),
        (Some(4), Some(4))
    );
    let stats = admin_stats(p.admin.as_deref().unwrap());
    let handled: u64 = stats["servers"][0]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["service"] == "echo")
        .map(|m| m["handled"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        handled, 4,
        "refused before: never handled; refused after: handled"
    );
}

#[test]
fn a_payload_reader_without_the_grant_does_not_load() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        "server-interceptors = [\"peek\"]",
        &fixture("peek", "", "behaviour = \"payload\""),
    );
    let out = run_axle(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--manifest",
            manifest.to_str().unwrap(),
        ],
        cache.path(),
    );
    assert!(!out.status.success(), "it must not serve");
    let err = text(&out.stderr);
    assert!(
        err.contains("peek") && err.contains("payload") && err.contains("grant-payload = true"),
        "{err}"
    );
    // Granted, the same plugin loads and serves.
    let granted = write_manifest(
        dir.path(),
        "server-interceptors = [\"peek\"]",
        &fixture("peek", "grant-payload = true", "behaviour = \"payload\""),
    );
    let p = ServeProcess::start_with_manifest(Some(&granted), &["--admin", "127.0.0.1:0"]);
    let answers = calls(&rt, &client_of(&p), 3, &CallOptions::default());
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let c = server_counts(&p, "peek");
    assert_eq!(
        (c["passes"].as_u64(), c["memo_hits"].as_u64()),
        (Some(3), Some(0))
    );
}

#[test]
fn a_trapping_interceptor_gets_its_safe_default_and_the_provider_stays_up() {
    let rt = rt();
    for (on_error, expect_ok) in [("pass", true), ("refuse", false)] {
        let dir = tempfile::tempdir().unwrap();
        let p = provider(
            dir.path(),
            "server-interceptors = [\"trap\"]",
            &fixture(
                "trap",
                &format!("on-error = \"{on_error}\""),
                "behaviour = \"panic\"",
            ),
        );
        let client = client_of(&p);
        let answers = calls(&rt, &client, 6, &as_app("web"));
        if expect_ok {
            assert!(
                answers.iter().all(Result::is_ok),
                "on-error = pass: {answers:?}"
            );
        } else {
            // Refused with `internal`; once those pile up the caller's breaker opens and
            // fails the rest fast, which is the caller doing its job.
            assert_eq!(remote_class(&answers[0]).as_deref(), Some("internal"));
            for answer in &answers {
                let class = answer.as_ref().err().map(CallError::class);
                assert!(
                    matches!(class, Some("internal" | "breaker_open")),
                    "on-error = refuse: {answer:?}"
                );
            }
        }
        let c = server_counts(&p, "trap");
        let calls_seen = c["calls"].as_u64().unwrap();
        assert!(calls_seen >= if expect_ok { 6 } else { 1 }, "{c}");
        assert_eq!(
            c["faults"].as_u64(),
            Some(calls_seen),
            "every call faulted: {c}"
        );
        let stats = admin_stats(p.admin.as_deref().unwrap());
        let row = stats["servers"][0]["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "trap")
            .cloned()
            .unwrap();
        assert!(row["traps"].as_u64().unwrap() >= 1, "{row}");
        // The process stayed up and keeps answering the same way.
        let later = calls(&rt, &client, 1, &as_app("web"));
        assert_eq!(later[0].is_ok(), expect_ok, "{later:?}");
    }
}

#[test]
fn a_caller_side_refusal_fails_the_call_before_anything_is_sent() {
    let rt = rt();
    let p = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let text = fixture(
        "gate",
        "",
        "behaviour = \"refuse\"\nclass = \"rate-limited\"\npoints = [\"client-before\"]",
    );
    let extra = Manifest::parse(
        &format!("{}{text}", axle::manifest::defaults::EMBEDDED_MANIFEST),
        "test.toml",
        Path::new("/"),
    )
    .expect("manifest with the fixture");
    m.plugins
        .insert("gate".into(), extra.plugins["gate"].clone());
    m.services
        .entry("echo".into())
        .or_default()
        .client_interceptors = Some(vec!["gate".into()]);
    let host = PluginHost::new(None).expect("host");
    let client = Client::new(
        &host,
        ClientConfig::new(m).endpoints("echo", vec![EndpointSpec::new(p.addr.clone())]),
    )
    .expect("client");
    let answers = calls(&rt, &client, 3, &CallOptions::default());
    for answer in &answers {
        let Err(e @ CallError::Intercepted { interceptor, .. }) = answer else {
            panic!("not refused on the caller: {answer:?}");
        };
        assert_eq!((interceptor.as_str(), e.class()), ("gate", "rate_limited"));
        assert!(e.to_string().contains("client-before"), "{e}");
    }
    let stats = admin_stats(p.admin.as_deref().unwrap());
    let requests: u64 = stats["servers"][0]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(requests, 0, "nothing reached the provider");
    let (_, s) = client
        .plugin_stats()
        .into_iter()
        .find(|(n, _)| n == "gate")
        .expect("gate counters");
    let c = s.intercept.expect("interceptor counters");
    assert_eq!((c.calls, c.refusals, c.memo_hits), (3, 3, 2), "{c:?}");
}

#[test]
fn the_memo_is_bounded_whatever_names_callers_send() {
    use axle::plugin::kinds::interceptor::{CallView, InterceptPoint, InterceptVerdict, MEMO_MAX};
    use axle::plugin::Plugin;
    let t = axle_host_tests::TestHost::new();
    let loaded = t
        .load(
            &axle_host_tests::manifest(
                "gate",
                "interceptor",
                "builtin:allow-apps",
                "[plugins.gate.config]\ndeny = [\"bad*\"]",
            ),
            "gate",
        )
        .expect("allow-apps loads");
    let Plugin::Interceptor(gate) = &loaded.plugin else {
        panic!("not an interceptor");
    };
    let names: Vec<String> = (0..MEMO_MAX + 500).map(|i| format!("app-{i}")).collect();
    let ask = |app: &str| {
        gate.intercept(&CallView {
            consumer_app: app,
            ..CallView::new(InterceptPoint::ServerBefore, "echo", "say")
        })
    };
    let start = loaded.stats.snapshot().calls; // `declare` was one
    for name in &names {
        assert!(ask(name).by_plugin);
    }
    assert_eq!(gate.memo_len(), MEMO_MAX, "the memo stops at its bound");
    let entered = loaded.stats.snapshot().calls;
    assert_eq!(
        entered - start,
        names.len() as u64,
        "each new name entered the plugin once"
    );
    // An early name is answered from the memo; one past the bound enters the plugin again.
    ask(&names[0]);
    ask(names.last().unwrap());
    let s = loaded.stats.snapshot();
    assert_eq!(s.calls, entered + 1);
    let c = s.intercept.expect("interceptor counters");
    assert_eq!(c.memo_hits, 1, "{c:?}");
    // Past the bound the plugin still decides: a denied name is refused.
    let denied = ask("bad-bot");
    assert!(denied.by_plugin && matches!(denied.verdict, InterceptVerdict::Refuse(_)));
    assert_eq!(gate.memo_len(), MEMO_MAX);
}

#[test]
fn a_running_provider_swaps_its_interceptor_chain() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let p = provider(
        dir.path(),
        "",
        "\n[plugins.gate]\nkind = \"interceptor\"\ncomponent = \"builtin:allow-apps\"\n\
         [plugins.gate.config]\ndeny = [\"web\"]\n",
    );
    let admin = p.admin.clone().expect("admin");
    let client = client_of(&p);
    let swap = |chain: &str| {
        let out = std::process::Command::new(axle_host_tests::axle_bin())
            .args(["swap", "server-interceptors", chain, "--admin", &admin])
            .output()
            .expect("run axle swap");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert!(calls(&rt, &client, 2, &as_app("web"))
        .iter()
        .all(Result::is_ok));
    let out = swap("gate");
    assert!(out.contains("loaded: gate"), "{out}");
    let refused = calls(&rt, &client, 2, &as_app("web"));
    assert!(
        refused
            .iter()
            .all(|r| remote_class(r).as_deref() == Some("forbidden")),
        "{refused:?}"
    );
    assert_eq!(server_counts(&p, "gate")["refusals"], 2);
    // An empty chain turns it off again; the provider keeps serving throughout.
    swap("");
    assert!(calls(&rt, &client, 2, &as_app("web"))
        .iter()
        .all(Result::is_ok));
}
