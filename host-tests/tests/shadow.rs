//! Shadow plugins on live traffic (`docs/shadow.md`): a candidate selector, router chain
//! or limiter decides beside the live one on a sampled share of calls, through real
//! `axle serve` providers and the public client. Its answer is never used (the live
//! distribution stays exact), its faults never fail a call, and what it would have
//! decided is counted.

use std::path::{Path, PathBuf};

use axle::client::{Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::shadow::ShadowView;
use axle::plugin::PluginHost;
use axle_host_tests::{
    admin_stats, built_component, calls_per_server, drive_echo, rt, ServeProcess,
};

/// Writes `text` as a manifest in `dir`, laid over the embedded defaults when loaded.
fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("shadow.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// A client of `flaky` at `servers` from the manifest `text` (over the defaults); the
/// live selector round-robin with a call budget that a loaded machine does not miss.
fn client(host: &PluginHost, dir: &Path, text: &str, servers: &[ServeProcess]) -> Client {
    let text = format!(
        "[plugins.round-robin]\ntimeout-ms = 1000\n\
         [services.flaky.slots]\nselector = \"round-robin\"\n{text}"
    );
    let mut m = Manifest::load(&write(dir, &text)).expect("a valid manifest");
    m.endpoints.clear();
    let endpoints = servers.iter().map(|s| EndpointSpec::new(&s.addr));
    Client::new(host, ClientConfig::new(m).endpoints("flaky", endpoints)).expect("client")
}

/// The client's shadows of `flaky`.
fn shadows(client: &Client) -> Vec<ShadowView> {
    client
        .services()
        .into_iter()
        .find(|s| s.service == "flaky")
        .map(|s| s.shadows)
        .unwrap_or_default()
}

const RANDOM_CANDIDATE: &str = "
[plugins.candidate]
kind = \"selector\"
component = \"builtin:random\"
timeout-ms = 1000
[plugins.candidate.config]
seed = 7
";

#[test]
fn a_random_shadow_diverges_two_times_in_three_and_leaves_round_robin_exact() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let text = format!("shadow-selector = \"candidate\"\nshadow-sample = 1.0\n{RANDOM_CANDIDATE}");
    let client = client(&host, dir.path(), &text, &servers);
    let runtime = rt();
    // One caller, one call after another: round-robin gives each exactly a third.
    assert_eq!(
        calls_per_server(&runtime, &client, &servers, 600),
        [200, 200, 200]
    );
    let all = shadows(&client);
    assert_eq!(all.len(), 1, "{all:?}");
    let s = &all[0];
    assert_eq!(
        (s.kind.as_str(), s.live.as_str()),
        ("selector", "round-robin")
    );
    assert_eq!(s.candidate, "candidate");
    assert_eq!(s.sampled, 600, "every call sampled at 1.0: {s:?}");
    assert_eq!(s.faults, 0, "{s:?}");
    // A uniform pick matches round-robin's one time in three: 400 divergences expected,
    // standard deviation about 11.5; 340..=460 is over five of them.
    assert!((340..=460).contains(&s.diverged), "{s:?}");
    assert_eq!(s.agreed + s.diverged, 600);
    // The latest divergences name both endpoints with their facts.
    assert_eq!(s.recent.len(), axle::plugin::shadow::RECENT);
    let d = s.recent.last().unwrap();
    assert_ne!(d.live, d.candidate);
    let addrs: Vec<&str> = servers.iter().map(|s| s.addr.as_str()).collect();
    let (live, candidate) = (d.live_facts.as_ref(), d.candidate_facts.as_ref());
    assert!(addrs.contains(&live.unwrap().address.as_str()), "{d:?}");
    assert!(
        addrs.contains(&candidate.unwrap().address.as_str()),
        "{d:?}"
    );
    assert!(live.unwrap().window_total > 0, "facts were read: {d:?}");

    // A swap that keeps the shadow keeps its counters; one without it drops it, and the
    // live selector carries on exactly.
    let kept = format!("shadow-selector = \"candidate\"\nshadow-sample = 1.0\n{RANDOM_CANDIDATE}\n[governance]\ntimeout-ms = 4000\n");
    let m = Manifest::load(&write(dir.path(), &format!(
        "[plugins.round-robin]\ntimeout-ms = 1000\n[services.flaky.slots]\nselector = \"round-robin\"\n{kept}"
    )))
    .unwrap();
    client.swap(&host, m).expect("swap keeping the shadow");
    assert_eq!(
        shadows(&client)[0].sampled,
        600,
        "counters kept across the swap"
    );
    let m = Manifest::load(&write(
        dir.path(),
        "[plugins.round-robin]\ntimeout-ms = 1000\n[services.flaky.slots]\nselector = \"round-robin\"\n",
    ))
    .unwrap();
    client.swap(&host, m).expect("swap dropping the shadow");
    assert!(shadows(&client).is_empty());
    assert_eq!(
        calls_per_server(&runtime, &client, &servers, 300),
        [100, 100, 100]
    );
}

#[test]
fn a_panicking_shadow_never_fails_a_call_and_its_faults_are_counted() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let fixture = built_component("axle_fixture_hostile");
    let text = format!(
        "shadow-selector = \"hostile\"\nshadow-sample = 1.0\n\
         [plugins.hostile]\nkind = \"selector\"\ncomponent = {:?}\ntimeout-ms = 100\n\
         [plugins.hostile.config]\nbehaviour = \"panic\"\nevery = 1\n",
        fixture.display().to_string()
    );
    let client = client(&host, dir.path(), &text, &servers);
    let runtime = rt();
    assert_eq!(
        calls_per_server(&runtime, &client, &servers, 300),
        [100, 100, 100]
    );
    let s = &shadows(&client)[0];
    assert_eq!(
        (s.sampled, s.faults, s.agreed, s.diverged),
        (300, 300, 0, 0),
        "{s:?}"
    );
    let stats = axle_host_tests::plugin_stats(&client, "hostile");
    assert!(stats.faults() > 0, "the host counted its faults: {stats:?}");
}

#[test]
fn a_tenth_is_sampled_and_a_shadow_router_chain_is_compared_as_sets() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    // The tag router with no rule keeps every endpoint: the same set as the live chain.
    let text = format!(
        "shadow-selector = \"candidate\"\nshadow-routers = [\"lanes\"]\nshadow-sample = 0.1\n\
         {RANDOM_CANDIDATE}\n[plugins.lanes]\nkind = \"router\"\ncomponent = \"builtin:tag\"\ntimeout-ms = 1000\n"
    );
    let client = client(&host, dir.path(), &text, &servers);
    let runtime = rt();
    assert_eq!(
        calls_per_server(&runtime, &client, &servers, 1500),
        [500, 500, 500]
    );
    let all = shadows(&client);
    let selector = all.iter().find(|s| s.kind == "selector").expect("selector");
    let routers = all.iter().find(|s| s.kind == "routers").expect("routers");
    // 150 expected, standard deviation about 11.6: 100..=200 is over four of them.
    assert!((100..=200).contains(&selector.sampled), "{selector:?}");
    assert_eq!(
        routers.sampled, selector.sampled,
        "one draw decides for both"
    );
    assert_eq!(
        (routers.agreed, routers.diverged),
        (routers.sampled, 0),
        "{routers:?}"
    );
    assert_eq!(routers.live, "tag");
}

#[test]
fn a_shadow_limiter_that_would_reject_never_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(
        dir.path(),
        "[slots]\nshadow-limiter = \"tight\"\nshadow-sample = 1.0\n\
         [plugins.tight]\nkind = \"limiter\"\ncomponent = \"builtin:token-bucket\"\ntimeout-ms = 1000\n\
         [plugins.tight.config]\nrate = 0.001\nburst = 1\n",
    );
    let server = ServeProcess::start_with_manifest(Some(&manifest), &["--admin", "127.0.0.1:0"]);
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let client = axle_host_tests::client_for(
        &host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(&server.addr)],
    );
    let runtime = rt();
    let calls = 40;
    let (ok, failed) = drive_echo(&runtime, &client, 1, calls, "shadow limiter", |_, _| {
        Default::default()
    });
    assert_eq!(
        (ok, failed),
        (calls, 0),
        "the live limiter admits everything"
    );
    let admin = server.admin.as_deref().expect("admin address");
    let stats = admin_stats(admin);
    let shadow = &stats["servers"][0]["shadows"][0];
    assert_eq!(shadow["kind"], "limiter", "{stats}");
    assert_eq!(shadow["live"], "token-bucket");
    assert_eq!(shadow["candidate"], "tight");
    // A bucket of one token that refills once in a thousand seconds: the first request
    // agrees, every other one diverges.
    assert_eq!(shadow["sampled"], calls, "{shadow}");
    assert_eq!(shadow["agreed"], 1, "{shadow}");
    assert_eq!(shadow["diverged"], calls - 1, "{shadow}");
    let last = &shadow["recent"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["live"].as_str().unwrap().starts_with("admit echo/"),
        "{last}"
    );
    assert!(
        last["candidate"].as_str().unwrap().starts_with("reject"),
        "{last}"
    );
    // The same in the table, and in the scrape.
    let table = std::process::Command::new(axle_host_tests::axle_bin())
        .args(["stats", "--admin", admin])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("shadows") && table.contains("tight"),
        "{table}"
    );
    let metrics = axle_host_tests::http::request(admin, "GET", "/metrics", &[], b"").unwrap();
    let line = format!(
        "axle_shadow_diverged_total{{side=\"server\",owner=\"serve\",service=\"\",kind=\"limiter\",plugin=\"tight\"}} {}",
        calls - 1
    );
    assert!(
        metrics.body.contains("axle_shadow_diverged_total{"),
        "{}",
        metrics.body
    );
    let found = metrics.body.lines().any(|l| {
        l.starts_with("axle_shadow_diverged_total") && l.ends_with(&format!(" {}", calls - 1))
    });
    assert!(found, "expected a line like {line}:\n{}", metrics.body);

    // The dashboard's shadow table shows it (in a headless browser, when there is one).
    let Some(browser) = axle_host_tests::webdriver::Browser::start_or_skip("shadow") else {
        return;
    };
    browser.goto(&format!("http://{admin}/"));
    let row = || {
        browser.execute(
            "const r = document.querySelector('#shadows tr.shadow[data-plugin=\"tight\"]'); \
             return r ? Array.from(r.cells).map(c => c.textContent) : null;",
        )
    };
    let shown =
        axle_host_tests::etcd::wait_until(std::time::Duration::from_secs(30), || row().is_array());
    assert!(shown.is_some(), "the dashboard lists the shadow: {}", row());
    let cells: Vec<String> = row()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(cells[2], "limiter", "{cells:?}");
    assert_eq!(cells[3], "token-bucket", "{cells:?}");
    assert!(cells[7].starts_with(&(calls - 1).to_string()), "{cells:?}");
    assert!(
        cells[9].contains("reject"),
        "the latest divergence: {cells:?}"
    );
}

#[test]
fn a_shadow_that_fills_a_live_slot_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "[services.flaky.slots]\nselector = \"round-robin\"\nshadow-selector = \"smooth-weighted\"\n",
    );
    let err = Manifest::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("services.flaky.slots.shadow-selector") && err.contains("live slot"),
        "{err}"
    );
}
