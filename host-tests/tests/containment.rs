//! Plugin containment where production runs: a hostile selector loaded by a manifest, in
//! a multi-thread Tokio runtime, on the real client path — 32 callers through the public
//! `Client`, three real `axle serve` providers, 64-byte raw echo. Each behaviour must end
//! with every call answered, no task panicked, and what the plugin did counted.

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::{ComponentSource, EndpointSpec, Manifest, PluginKind, PluginSpec};
use axle::plugin::{PluginHost, StatsSnapshot};
use axle_host_tests::{built_component, drive_echo, rt, step_until, ServeProcess};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

const CALLERS: usize = 32;

/// The hostile fixture in `lang` (`rust`: built by host-tests/build.rs; `c`, `python`,
/// `js` (QuickJS), `js-starlingmonkey`: `fixtures/<c|python|js>/hostile`, built here once per
/// test binary with `xtask build-plugin`, whose toolchains `scripts/test` installs).
fn fixture(lang: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    if lang == "rust" {
        return built_component("axle_fixture_hostile");
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(l, _)| l == lang) {
        return path.clone();
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = if lang.starts_with("js") { "js" } else { lang };
    let dir = here.join("fixtures").join(source).join("hostile");
    let out = Path::new(env!("AXLE_TARGET_DIR"))
        .join("hostile-fixtures")
        .join(format!("{lang}.wasm"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--release", "-q", "--manifest-path"])
        .arg(here.join("../Cargo.toml"))
        .args(["-p", "xtask", "--", "build-plugin", "--lang", lang])
        .arg(&dir)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run xtask");
    assert!(
        status.success(),
        "building the {lang} hostile fixture failed"
    );
    built.push((lang.to_string(), out.clone()));
    out
}

/// A client of `echo` at `endpoints` whose selector is the `lang` hostile fixture doing
/// `behaviour` on every `every`-th pick.
fn hostile_client(
    host: &PluginHost,
    lang: &str,
    behaviour: &str,
    every: i64,
    endpoints: &[EndpointSpec],
) -> Client {
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let mut config = toml::Table::new();
    config.insert("behaviour".into(), toml::Value::String(behaviour.into()));
    if lang == "rust" {
        config.insert("every".into(), toml::Value::Integer(every));
    }
    m.plugins.insert(
        "hostile".into(),
        PluginSpec {
            timeout_ms: if lang == "rust" { 20 } else { 100 },
            memory_bytes: if lang == "rust" { 64 << 20 } else { 256 << 20 },
            config,
            ..PluginSpec::new(
                "hostile",
                PluginKind::Selector,
                ComponentSource::File(fixture(lang)),
            )
        },
    );
    m.services.entry("echo".into()).or_default().selector = Some("hostile".into());
    Client::new(
        host,
        ClientConfig::new(m).endpoints("echo", endpoints.to_vec()),
    )
    .expect("client")
}

fn plain(_caller: usize, _call: u64) -> CallOptions {
    CallOptions::default()
}

/// What a run saw.
struct Run {
    ok: u64,
    failed: u64,
    stats: StatsSnapshot,
}

/// `calls` calls from each of [`CALLERS`] tasks; fails the test if any task panicked.
fn run(behaviour: &str, every: i64, calls: u64) -> Run {
    run_in("rust", behaviour, every, calls, |_| true)
}

/// [`run`], then calls until the faulted instance's replacement is in use.
fn run_until_replaced(lang: &str, behaviour: &str, every: i64, calls: u64) -> Run {
    run_in(lang, behaviour, every, calls, |s| s.replaced >= 1)
}

/// One caller's echo calls, four at a time, every one answered, until `reached` holds of
/// `counters()` ([`axle_host_tests::step_until`]).
fn echo_until<S>(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    behaviour: &str,
    counters: impl Fn() -> S,
    reached: fn(&S) -> bool,
) -> S {
    step_until(counters, reached, || {
        let (_, failed) = drive_echo(runtime, client, 1, 4, behaviour, plain);
        assert_eq!(failed, 0, "{behaviour}: a call made while waiting failed");
    })
}

/// [`run`] with the fixture in `lang`. Once the callers are done, one caller goes on
/// calling, a few calls at a time, until `reached` holds of the plugin's counters
/// ([`echo_until`]).
fn run_in(
    lang: &str,
    behaviour: &str,
    every: i64,
    calls: u64,
    reached: fn(&StatsSnapshot) -> bool,
) -> Run {
    let providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let endpoints: Vec<EndpointSpec> = providers
        .iter()
        .map(|p| EndpointSpec::new(p.addr.clone()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let client = hostile_client(&host, lang, behaviour, every, &endpoints);
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, calls, behaviour, plain);
    let hostile = || axle_host_tests::plugin_stats(&client, "hostile");
    let stats = echo_until(&runtime, &client, behaviour, hostile, reached);
    eprintln!(
        "{behaviour}: {ok} ok, {failed} failed; plugin calls {}, faults {} (timeouts {}, \
         memory {}, blocked {}, traps {}), replaced {}, log lines {} (dropped {})",
        stats.calls,
        stats.faults(),
        stats.timeouts,
        stats.memory,
        stats.blocked,
        stats.traps,
        stats.replaced,
        stats.log_lines,
        stats.log_dropped
    );
    drop(providers);
    Run { ok, failed, stats }
}

#[test]
fn a_printing_plugin_logs_and_every_call_completes() {
    let r = run("print", 100, 100);
    assert_eq!((r.ok, r.failed), (3_200, 0));
    assert_eq!(r.stats.faults(), 0, "printing is no fault");
    // 32 lines on each of two streams; the budget logs a burst, then drops and counts.
    assert_eq!(r.stats.log_lines + r.stats.log_dropped, 64);
    assert!(
        r.stats.log_lines >= 10,
        "{} lines logged",
        r.stats.log_lines
    );
}

#[test]
fn a_panicking_plugin_is_replaced_and_its_message_logged() {
    let r = run_until_replaced("rust", "panic", 50, 100);
    assert_eq!((r.ok, r.failed), (3_200, 0), "the safe default answers");
    assert!(r.stats.traps >= 1, "the panic is a trap");
    assert!(r.stats.replaced >= 1, "the instance is replaced");
    assert!(r.stats.log_lines >= 1, "the panic message reached the log");
}

/// An abort is a trap on `unreachable`, delivered to the kernel as a signal (a panic in a
/// plugin built with the SDK exits through WASI instead): the same fault to the caller.
#[test]
fn an_aborting_plugin_is_replaced_like_a_panicking_one() {
    let r = run_until_replaced("rust", "abort", 50, 100);
    assert_eq!((r.ok, r.failed), (3_200, 0), "the safe default answers");
    assert!(r.stats.traps >= 1, "the abort is a trap");
    assert!(r.stats.replaced >= 1, "the instance is replaced");
}

#[test]
fn a_sleeping_plugin_faults_at_once_instead_of_holding_a_thread() {
    let r = run("sleep", 1, 50);
    assert_eq!((r.ok, r.failed), (1_600, 0), "the safe default answers");
    assert!(r.stats.blocked >= 1, "the sleep is a blocked fault");
    assert_eq!(
        r.stats.timeouts, 0,
        "refused at once, not interrupted at the deadline"
    );
}

#[test]
fn a_spinning_plugin_is_quarantined_and_calls_go_on_without_it() {
    let r = run("spin", 1, 100);
    assert_eq!((r.ok, r.failed), (3_200, 0), "the safe default answers");
    assert!(
        r.stats.timeouts >= 1,
        "the spin is interrupted at its deadline"
    );
    assert!(r.stats.trips >= 1, "the plugin is put in quarantine");
    assert!(
        r.stats.skipped > 3_200 / 2,
        "most calls skip it: {} skipped",
        r.stats.skipped
    );
    assert!(
        r.stats.timeouts + r.stats.busy < 3_200 / 10,
        "few calls pay for the spin: {} timeouts, {} busy",
        r.stats.timeouts,
        r.stats.busy
    );
}

#[test]
fn a_plugin_whose_init_never_returns_fails_to_load_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let _enter = runtime.enter();
    let mut config = toml::Table::new();
    config.insert("behaviour".into(), toml::Value::String("spin-init".into()));
    let spec = PluginSpec {
        config,
        ..PluginSpec::new(
            "hostile",
            PluginKind::Selector,
            ComponentSource::File(built_component("axle_fixture_hostile")),
        )
    };
    let err = host.load(&spec).err().expect("the load fails").to_string();
    assert!(
        err.contains("hostile") && err.contains("timed out"),
        "{err}"
    );
}

#[test]
fn a_plugin_growing_its_memory_hits_the_cap_and_is_replaced() {
    let r = run_until_replaced("rust", "grow", 1, 50);
    assert_eq!((r.ok, r.failed), (1_600, 0), "the safe default answers");
    assert!(
        r.stats.memory >= 1,
        "the cap holds: {} memory faults",
        r.stats.memory
    );
    assert!(r.stats.replaced >= 1);
}

/// The `lang` fixture printing on every pick: every call answered, no fault, the lines
/// in the log (a burst, then counted drops).
fn prints_and_every_call_completes(lang: &str) {
    let r = run_in(lang, "print", 1, 50, |_| true);
    assert_eq!((r.ok, r.failed), (1_600, 0));
    assert_eq!(r.stats.faults(), 0, "printing is no fault");
    assert!(r.stats.log_lines >= 10 && r.stats.log_lines + r.stats.log_dropped >= 1_600);
}

/// The `lang` fixture raising on every 50th pick: the exception is a trap, the instance
/// replaced, every call answered by the plugin or the safe default.
fn raises_and_every_call_completes(lang: &str) {
    let r = run_until_replaced(lang, "raise", 1, 50);
    assert_eq!((r.ok, r.failed), (1_600, 0), "the safe default answers");
    assert!(
        r.stats.traps >= 1 && r.stats.replaced >= 1,
        "the exception is a trap"
    );
}

#[test]
fn a_python_plugin_that_prints_logs_and_every_call_completes() {
    prints_and_every_call_completes("python");
}

#[test]
fn a_js_plugin_that_logs_to_the_console_logs_and_every_call_completes() {
    // StarlingMonkey: the QuickJS backend has no `console` at all.
    prints_and_every_call_completes("js-starlingmonkey");
}

#[test]
fn a_c_plugin_that_prints_logs_and_every_call_completes() {
    prints_and_every_call_completes("c");
}

#[test]
fn a_c_plugin_that_aborts_is_replaced_and_calls_complete() {
    raises_and_every_call_completes("c");
}

#[test]
fn a_python_plugin_that_raises_is_replaced_and_calls_complete() {
    raises_and_every_call_completes("python");
}

#[test]
fn a_js_plugin_that_throws_is_replaced_and_calls_complete() {
    raises_and_every_call_completes("js");
}

/// A real `axle serve` whose limiter is the hostile limiter doing `behaviour` on every
/// `every`-th request: 32 callers' calls all answered (the limiter fails open, its
/// default), the provider serving throughout, and the faults in its admin stats.
/// Then, like [`run_in`], one caller goes on until `reached` holds of the counters.
fn serve_with_hostile_limiter(
    behaviour: &str,
    every: i64,
    reached: fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    let text = axle::manifest::defaults::EMBEDDED_MANIFEST.replace(
        "limiter = \"token-bucket\"",
        "limiter = \"hostile-limiter\"",
    );
    assert_ne!(text, axle::manifest::defaults::EMBEDDED_MANIFEST);
    let component = built_component("axle_fixture_hostile_limiter");
    std::fs::write(
        &manifest,
        format!(
            "{text}\n[plugins.hostile-limiter]\nkind = \"limiter\"\ncomponent = {:?}\n\
             [plugins.hostile-limiter.config]\nbehaviour = {behaviour:?}\nevery = {every}\n",
            component.to_str().unwrap()
        ),
    )
    .unwrap();
    // Its faults are counted in its stats; its log would only flood the test output.
    let server = ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_LOG", "error,plugin=off")],
    );
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let client = axle_host_tests::client_for(
        &host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(server.addr.clone())],
    );
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, 50, behaviour, plain);
    let admin = server.admin.clone().expect("--admin prints its address");
    let counters = || {
        let report = axle_host_tests::admin_stats(&admin);
        report["servers"][0]["plugins"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "hostile-limiter"))
            .cloned()
            .unwrap_or_else(|| panic!("the limiter's counters in {report}"))
    };
    let limiter = echo_until(&runtime, &client, behaviour, counters, reached);
    eprintln!("serve, limiter {behaviour}: {ok} ok, {failed} failed; {limiter}");
    assert_eq!((ok, failed), (1_600, 0), "every call answered");
    limiter
}

#[test]
fn a_provider_with_a_printing_limiter_serves_and_logs() {
    let limiter = serve_with_hostile_limiter("print", 10, |_| true);
    assert_eq!(limiter["traps"], 0);
    assert!(limiter["log_lines"].as_u64().unwrap() >= 10, "{limiter}");
}

#[test]
fn a_provider_with_a_panicking_limiter_serves_and_counts() {
    let limiter = serve_with_hostile_limiter("panic", 20, |l| l["replaced"].as_u64() >= Some(1));
    assert!(limiter["traps"].as_u64().unwrap() >= 1, "{limiter}");
    assert!(limiter["replaced"].as_u64().unwrap() >= 1, "{limiter}");
}

#[test]
fn a_provider_with_a_spinning_limiter_quarantines_it_and_serves() {
    // How many of the 1,600 calls find the limiter quarantined rather than being
    // replaced depends on how fast the machine builds replacements: call on until half
    // as many have been skipped.
    let limiter = serve_with_hostile_limiter("spin", 1, |l| l["skipped"].as_u64() >= Some(800));
    assert!(limiter["timeouts"].as_u64().unwrap() >= 1, "{limiter}");
    assert!(limiter["trips"].as_u64().unwrap() >= 1, "{limiter}");
    assert!(limiter["skipped"].as_u64().unwrap() >= 800, "{limiter}");
}

/// The hostile router in `echo`'s routers, 32 callers whose every call carries a new
/// `lane` tag (a request shape never seen, so the router is asked each time): every call
/// answered, unfiltered when the router fails, and what it did counted.
fn run_hostile_router(behaviour: &str) -> StatsSnapshot {
    let providers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let endpoints: Vec<EndpointSpec> = providers
        .iter()
        .map(|p| EndpointSpec::new(p.addr.clone()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let mut config = toml::Table::new();
    config.insert("behaviour".into(), toml::Value::String(behaviour.into()));
    m.plugins.insert(
        "hostile-router".into(),
        PluginSpec {
            config,
            ..PluginSpec::new(
                "hostile-router",
                PluginKind::Router,
                ComponentSource::File(built_component("axle_fixture_hostile_router")),
            )
        },
    );
    m.services.entry("echo".into()).or_default().routers = Some(vec!["hostile-router".into()]);
    let runtime = rt();
    let client = Client::new(&host, ClientConfig::new(m).endpoints("echo", endpoints)).unwrap();
    // Every call a new request shape: the router is asked each time, not its memo.
    let new_lane =
        |caller: usize, call: u64| CallOptions::default().tag("lane", format!("{caller}-{call}"));
    let (ok, failed) = drive_echo(&runtime, &client, CALLERS, 50, behaviour, new_lane);
    let stats = axle_host_tests::plugin_stats(&client, "hostile-router");
    eprintln!("router {behaviour}: {ok} ok, {failed} failed; {stats:?}");
    assert_eq!((ok, failed), (1_600, 0), "every call answered, unfiltered");
    stats
}

#[test]
fn a_router_answering_too_many_duplicate_or_stranger_endpoints_is_caught() {
    for behaviour in ["huge", "duplicate", "stranger"] {
        let s = run_hostile_router(behaviour);
        assert!(
            s.invalid >= 1,
            "{behaviour}: invalid answers counted: {s:?}"
        );
        assert!(s.trips >= 1, "{behaviour}: quarantined: {s:?}");
        assert_eq!(
            s.replaced, 0,
            "{behaviour}: a wrong answer kills no instance"
        );
    }
}

#[test]
fn a_panicking_router_is_quarantined_and_calls_go_on_unfiltered() {
    let s = run_hostile_router("panic");
    assert!(s.traps >= 1 && s.trips >= 1, "{s:?}");
}
