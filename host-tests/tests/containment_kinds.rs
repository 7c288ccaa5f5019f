//! Plugin containment for the kinds beside the selector, where production runs: a hostile
//! health scorer and a hostile serializer in a client driven by many tasks on a
//! multi-thread Tokio runtime, and a hostile serializer in a real `axle serve`. Each ends
//! with the kernel serving (the paths the plugin is not in answer every call), the fault
//! counted and visible, and nothing panicked.

use std::time::{Duration, Instant};

use axle::client::{CallError, CallOptions, Client, ClientConfig};
use axle::manifest::{ComponentSource, EndpointSpec, Manifest, PluginKind, PluginSpec};
use axle::plugin::{PluginHost, StatsSnapshot};
use axle_host_tests::{built_component, drive_echo, rt, ServeProcess};

const CALLERS: usize = 8;

fn plain(_caller: usize, _call: u64) -> CallOptions {
    CallOptions::default()
}

/// A plugin spec for the fixture `krate` of `kind` with `config` (TOML keys).
fn fixture_spec(name: &str, kind: PluginKind, krate: &str, config: &str) -> PluginSpec {
    PluginSpec {
        timeout_ms: 20,
        config: toml::from_str(config).expect("fixture config"),
        ..PluginSpec::new(name, kind, ComponentSource::File(built_component(krate)))
    }
}

/// The counters of plugin `name` of `client`.
fn stats_of(client: &Client, name: &str) -> StatsSnapshot {
    client
        .plugin_stats()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no counters for plugin `{name}`"))
}

/// Waits (bounded) until `done` holds for `name`'s counters; returns them.
fn wait_for_stats(
    client: &Client,
    name: &str,
    what: &str,
    done: impl Fn(&StatsSnapshot) -> bool,
) -> StatsSnapshot {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let s = stats_of(client, name);
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < until, "{what}: never happened: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// --- health scorer -------------------------------------------------------------------

/// A client of `echo` at three providers whose health scorer is the hostile fixture doing
/// `behaviour` every `every`-th score, judging every 10 ms: every echo call answered while
/// it misbehaves, and its counters once `done` holds.
fn hostile_scorer(behaviour: &str, every: u32, done: fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
    let providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let endpoints: Vec<EndpointSpec> = providers
        .iter()
        .map(|p| EndpointSpec::new(p.addr.clone()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    m.governance.health_interval_ms = Some(10);
    let config = format!("behaviour = {behaviour:?}\nevery = {every}");
    m.plugins.insert(
        "hostile-health".into(),
        fixture_spec(
            "hostile-health",
            PluginKind::HealthScorer,
            "axle_fixture_hostile_health",
            &config,
        ),
    );
    m.slots.health_scorer = Some("hostile-health".into());
    let runtime = rt();
    let client = runtime
        .block_on(async { Client::new(&host, ClientConfig::new(m).endpoints("echo", endpoints)) })
        .expect("client");
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, 100, behaviour, plain);
    let stats = wait_for_stats(&client, "hostile-health", behaviour, done);
    // The scorer's failures change no verdict: the previous one stands (healthy).
    let (more_ok, more_failed) = drive_echo(&runtime, &client, CALLERS, 50, behaviour, plain);
    eprintln!(
        "health scorer {behaviour}: {ok}+{more_ok} ok, {failed}+{more_failed} failed; {stats:?}"
    );
    assert_eq!((ok, failed), (800, 0), "every echo call answered");
    assert_eq!((more_ok, more_failed), (400, 0), "and after the faults");
    assert_eq!(client.admissible("echo"), 3, "no endpoint left rotation");
    drop(providers);
    stats
}

#[test]
fn a_panicking_health_scorer_is_replaced_and_the_verdicts_stand() {
    let s = hostile_scorer("panic", 2, |s| s.traps >= 2 && s.replaced >= 1);
    assert!(s.traps >= 2 && s.replaced >= 1, "{s:?}");
}

#[test]
fn a_spinning_health_scorer_is_quarantined() {
    let s = hostile_scorer("spin", 1, |s| s.trips >= 1 && s.skipped >= 1);
    assert!(s.timeouts >= 1, "{s:?}");
}

#[test]
fn a_printing_health_scorer_logs() {
    let s = hostile_scorer("print", 1, |s| s.log_lines >= 4);
    assert_eq!(s.faults(), 0, "printing is no fault: {s:?}");
}

// --- serializer, caller side ---------------------------------------------------------

/// `calls` typed `kv.put` calls from each of [`CALLERS`] tasks: (answered, failures).
fn drive_kv(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    calls: u64,
) -> (u64, Vec<CallError>) {
    runtime.block_on(async {
        let tasks: Vec<_> = (0..CALLERS)
            .map(|caller| {
                let client = client.clone();
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0u64, Vec::new());
                    for call in 0..calls {
                        let req = serde_json::json!({"key": format!("k{caller}"), "value": call});
                        let answer: Result<serde_json::Value, _> = client
                            .call("kv", "put", &req, &CallOptions::default())
                            .await;
                        match answer {
                            Ok(_) => ok += 1,
                            Err(e) => failed.push(e),
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let mut totals = (0, Vec::new());
        for t in tasks {
            let (ok, failed) = t.await.expect("a calling task did not finish");
            totals.0 += ok;
            totals.1.extend(failed);
        }
        totals
    })
}

/// Typed calls, one at a time, until `reached` holds of `counters()`
/// ([`axle_host_tests::step_until`]). Their own answers are not judged here: the
/// serializer may still fail them.
fn typed_calls_until<S>(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    counters: impl Fn() -> S,
    reached: fn(&S) -> bool,
) -> S {
    axle_host_tests::step_until(counters, reached, || {
        let req = serde_json::json!({"key": "wait", "value": 0});
        let _: Result<serde_json::Value, _> =
            runtime.block_on(client.call("kv", "put", &req, &CallOptions::default()));
    })
}

/// The hostile serializer in each world: node lists, and packed values.
const NODES: &str = "axle_fixture_hostile_serializer";
const PACKED: &str = "axle_fixture_hostile_packed_serializer";

/// A client of `kv` and `echo` at `endpoints` whose only serializer is the hostile
/// fixture `krate` with `config`.
fn client_with_serializer(
    host: &PluginHost,
    endpoints: &[EndpointSpec],
    krate: &str,
    config: &str,
) -> Client {
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    m.plugins.retain(|_, p| p.kind != PluginKind::Serializer);
    m.plugins.insert(
        "hostile-serializer".into(),
        fixture_spec("hostile-serializer", PluginKind::Serializer, krate, config),
    );
    m.slots.serializer = Some("hostile-serializer".into());
    Client::new(
        host,
        ClientConfig::new(m)
            .endpoints("kv", endpoints.to_vec())
            .endpoints("echo", endpoints.to_vec()),
    )
    .expect("client")
}

/// A failure the caller's serializer caused: an encode or decode error that says so.
fn is_serializer_failure(e: &CallError) -> bool {
    matches!(e, CallError::Encode(m) | CallError::Decode(m) if m.contains("serializer"))
}

/// The caller's serializer misbehaving: typed calls fail with a clear error as often as
/// it faults, raw calls (which it is not in) all answered.
fn caller_serializer(
    krate: &str,
    behaviour: &str,
    every: u32,
    reached: fn(&StatsSnapshot) -> bool,
) -> (u64, usize, StatsSnapshot) {
    let provider = ServeProcess::start(&[]);
    let endpoints = [EndpointSpec::new(provider.addr.clone())];
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let config =
        format!("behaviour = {behaviour:?}\nevery = {every}\ncontent-type = \"application/json\"");
    let client = client_with_serializer(&host, &endpoints, krate, &config);
    let (ok, failed) = drive_kv(&runtime, &client, 100);
    let stray: Vec<_> = failed
        .iter()
        .filter(|e| !is_serializer_failure(e))
        .collect();
    assert!(
        stray.is_empty(),
        "failures not from the serializer: {stray:?}"
    );
    let (echo_ok, echo_failed) = drive_echo(&runtime, &client, CALLERS, 50, behaviour, plain);
    assert_eq!((echo_ok, echo_failed), (400, 0), "raw calls do not meet it");
    let stats = typed_calls_until(
        &runtime,
        &client,
        || stats_of(&client, "hostile-serializer"),
        reached,
    );
    eprintln!(
        "caller serializer {behaviour}: {ok} ok, {} failed; {stats:?}",
        failed.len()
    );
    assert_eq!(ok + failed.len() as u64, 800);
    (ok, failed.len(), stats)
}

#[test]
fn a_panicking_caller_serializer_fails_only_the_calls_it_breaks() {
    let (ok, failed, s) = caller_serializer(NODES, "panic", 10, |s| s.replaced >= 1);
    assert!(s.traps >= 1 && s.replaced >= 1, "{s:?}");
    assert!(failed >= 1, "its faults are errors to the caller");
    assert!(ok >= 400, "most typed calls answered: {ok}");
}

#[test]
fn a_spinning_caller_serializer_is_quarantined_and_fails_fast() {
    let (ok, _, s) = caller_serializer(NODES, "spin", 1, |_| true);
    assert_eq!(ok, 0, "no bytes without the serializer");
    assert!(s.timeouts >= 1 && s.trips >= 1, "{s:?}");
    assert!(
        s.skipped >= 100,
        "quarantine answers without waiting: {s:?}"
    );
}

#[test]
fn a_panicking_packed_serializer_fails_only_the_calls_it_breaks() {
    let (ok, failed, s) = caller_serializer(PACKED, "panic", 10, |s| s.replaced >= 1);
    assert!(s.traps >= 1 && s.replaced >= 1, "{s:?}");
    assert!(failed >= 1, "its faults are errors to the caller");
    assert!(ok >= 400, "most typed calls answered: {ok}");
}

/// A packed serializer whose `decode-packed` answers bytes that are no packed value: the
/// kernel refuses the answer (a counted contract fault, toward quarantine), the typed
/// call fails saying so, and raw calls, which it is not in, are all answered.
#[test]
fn a_packed_serializer_answering_garbage_is_refused_not_believed() {
    let provider = ServeProcess::start(&[]);
    let endpoints = [EndpointSpec::new(provider.addr.clone())];
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let config = "behaviour = \"none\"\npacked = \"garbage\"\ncontent-type = \"application/json\"";
    let client = client_with_serializer(&host, &endpoints, PACKED, config);
    let (ok, failed) = drive_kv(&runtime, &client, 25);
    assert_eq!(ok, 0, "no reply can be decoded");
    assert_eq!(failed.len(), 200);
    // Each a serializer failure: the refused answer, or quarantine once those add up.
    let stray = failed.iter().find(|e| !is_serializer_failure(e));
    assert!(stray.is_none(), "{stray:?}");
    let named = |e: &CallError| matches!(e, CallError::Decode(m) if m.contains("decode-packed"));
    assert!(failed.iter().any(named), "{:?}", failed.first());
    let s = stats_of(&client, "hostile-serializer");
    assert!(s.invalid >= 1, "{s:?}");
    let (echo_ok, echo_failed) = drive_echo(&runtime, &client, CALLERS, 50, "garbage", plain);
    assert_eq!((echo_ok, echo_failed), (400, 0), "raw calls do not meet it");
}

// --- serializer, provider side -------------------------------------------------------

/// A real `axle serve` whose `application/x-hostile` serializer is the hostile fixture
/// doing `behaviour` every `every`-th call, called by a client whose serializer of that
/// type behaves: raw calls all answered, typed calls answered or failed by the
/// serializer, and the serializer's counters from the admin endpoint.
fn provider_serializer(
    behaviour: &str,
    every: u32,
    reached: fn(&serde_json::Value) -> bool,
) -> (u64, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    let component = built_component("axle_fixture_hostile_serializer");
    std::fs::write(
        &manifest,
        format!(
            "{}\n[plugins.hostile-serializer]\nkind = \"serializer\"\ncomponent = {:?}\n\
             timeout-ms = 20\n[plugins.hostile-serializer.config]\nbehaviour = {behaviour:?}\n\
             every = {every}\n",
            axle::manifest::defaults::EMBEDDED_MANIFEST,
            component.to_str().unwrap()
        ),
    )
    .unwrap();
    let server = ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_LOG", "error,plugin=off")],
    );
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let endpoints = [EndpointSpec::new(server.addr.clone())];
    let client = client_with_serializer(&host, &endpoints, NODES, "behaviour = \"none\"");
    let (ok, failed) = drive_kv(&runtime, &client, 100);
    // A failed decode refuses before the handler runs (`overloaded`: the call may fail
    // over); a failed encode comes after it ran, and only the answer is lost.
    let stray: Vec<_> = failed
        .iter()
        .filter(|e| {
            let encode = e.class() == "internal" && e.to_string().contains("cannot encode");
            e.class() != "overloaded" && !encode
        })
        .collect();
    assert!(
        stray.is_empty(),
        "failures the serializer does not explain: {stray:?}"
    );
    let (echo_ok, echo_failed) = drive_echo(&runtime, &client, CALLERS, 50, behaviour, plain);
    assert_eq!((echo_ok, echo_failed), (400, 0), "raw calls do not meet it");
    let counters = || {
        let report = axle_host_tests::admin_stats(server.admin.as_deref().unwrap());
        report["servers"][0]["plugins"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "hostile-serializer"))
            .cloned()
            .unwrap_or_else(|| panic!("the serializer's counters in {report}"))
    };
    let serializer = typed_calls_until(&runtime, &client, counters, reached);
    eprintln!(
        "provider serializer {behaviour}: {ok} ok, {} failed; {serializer}",
        failed.len()
    );
    (ok, serializer)
}

#[test]
fn a_provider_whose_serializer_panics_serves_and_counts() {
    let (ok, s) = provider_serializer("panic", 10, |s| s["replaced"].as_u64() >= Some(1));
    assert!(ok >= 400, "most typed calls answered: {ok}");
    assert!(s["traps"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["replaced"].as_u64().unwrap() >= 1, "{s}");
}

#[test]
fn a_provider_whose_serializer_spins_quarantines_it_and_serves() {
    let (_, s) = provider_serializer("spin", 1, |_| true);
    assert!(s["timeouts"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["trips"].as_u64().unwrap() >= 1, "{s}");
}
