//! Two-choice selectors (the `two-choice-selector` world): the plugin offers two
//! candidates, the kernel keeps the lighter by the plugin's declared measure, from the
//! facts it keeps. Through the real host with a fixture whose pairs are fixed, so each
//! comparison is known; a faulty pair is a counted fault answered by the safe default;
//! and the shipped least-loaded selectors (which answer runs of pairs, the
//! `two-choice-run-selector` world), and the C example of the plain world
//! (`plugins/examples/c/least-active`), on the real request path, against real providers,
//! keeping calls off a slow one. A fixture that traps, asked for pairs one at a time or
//! in runs, costs no call; one that traps late in an ask of several runs loses none of
//! the pairs it drew before.

use std::path::PathBuf;

use axle::client::{CallOptions, Client};
use axle::manifest::{ComponentSource, EndpointSpec, PluginKind, PluginSpec};
use axle_host_tests::{
    built_component, calls_at, example_component, manifest, plugin_picks, rt, selector, table,
    ServeProcess, TestHost,
};

fn fixture(t: &TestHost, mode: &str) -> axle::plugin::LoadedPlugin {
    let path = built_component("axle_fixture_two_choice");
    let extra = format!("[plugins.two.config]\nmode = \"{mode}\"");
    t.load(
        &manifest("two", "selector", path.to_str().unwrap(), &extra),
        "two",
    )
    .unwrap()
}

/// A client whose `echo` service picks among `servers` with the selector `component` in
/// mode `mode`, under the name `two`.
fn echo_client(t: &TestHost, servers: &[ServeProcess], component: PathBuf, mode: &str) -> Client {
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    let mut config = toml::Table::new();
    config.insert("mode".into(), toml::Value::String(mode.into()));
    m.plugins.insert(
        "two".into(),
        PluginSpec {
            timeout_ms: 1000,
            config,
            ..PluginSpec::new(
                "two",
                PluginKind::Selector,
                ComponentSource::File(component),
            )
        },
    );
    m.services.entry("echo".into()).or_default().selector = Some("two".into());
    let endpoints = servers.iter().map(|s| EndpointSpec::new(&s.addr));
    Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("echo", endpoints),
    )
    .unwrap()
}

/// Every pick of `n` from set 0, by endpoint; each must be the plugin's.
fn picks(p: &axle::plugin::LoadedPlugin, n: u64) -> Vec<u32> {
    plugin_picks(p, 0, 3, n)
}

#[test]
fn the_kernel_keeps_the_lighter_of_the_pair_by_the_declared_measure() {
    let t = TestHost::new();
    let facts = t.host.facts();
    for id in 0..3 {
        facts.register(id, 100);
    }
    let p = fixture(&t, "pair");
    let s = selector(&p);
    assert!(s.measure().is_some_and(|m| m.per_weight && !m.latency));
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    // The pair is always (0, 1). Idle: a tie, and the first is kept.
    assert_eq!(picks(&p, 500), [500, 0, 0]);
    // 0 busier than 1: 1 is kept.
    for _ in 0..2 {
        facts.get(0).unwrap().started();
    }
    assert_eq!(picks(&p, 500), [0, 500, 0]);
    // Per unit of effective weight: 5 in flight on weight 300 is lighter than 2 on 100,
    // 7 on 300 is not.
    let one = facts.get(1).unwrap();
    one.set_weight(300);
    for _ in 0..5 {
        one.started();
    }
    assert_eq!(picks(&p, 500), [0, 500, 0]);
    one.started();
    one.started();
    assert_eq!(picks(&p, 500), [500, 0, 0]);
    // The kernel read the facts as they are now: no table push or set redefinition.
    one.finished(1_000, axle::spi::OutcomeClass::Success);
    one.finished(1_000, axle::spi::OutcomeClass::Success);
    assert_eq!(picks(&p, 500), [0, 500, 0]);
    assert_eq!(p.stats.snapshot().faults(), 0);
}

#[test]
fn a_two_choice_selector_that_cannot_say_its_measure_does_not_load() {
    let t = TestHost::new();
    let path = built_component("axle_fixture_two_choice");
    let extra = "[plugins.two.config]\nmode = \"measure-traps\"";
    let err = t
        .load(
            &manifest("two", "selector", path.to_str().unwrap(), extra),
            "two",
        )
        .err()
        .expect("a trapping `measure` fails the load");
    assert!(err.to_string().contains("`measure` failed"), "{err}");
}

#[test]
fn a_pair_outside_the_set_is_a_fault_answered_by_a_member() {
    let t = TestHost::new();
    let p = fixture(&t, "outside");
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    let mut seen = [0u32; 3];
    for i in 0..300 {
        let pick = s.select(0, i).unwrap();
        assert!(!pick.by_plugin, "the kernel's random fallback answered");
        seen[pick.endpoint as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 50), "uniform fallback: {seen:?}");
    let stats = p.stats.snapshot();
    // Ten wrong answers in a row put it in quarantine: the rest skip it.
    assert_eq!(stats.invalid, 10, "{stats:?}");
    assert_eq!((stats.skipped, stats.trips), (290, 1), "{stats:?}");
}

#[test]
fn least_loaded_selectors_keep_calls_off_a_slow_provider_on_the_request_path() {
    // Two fast providers and one that answers `flaky` after 40 ms: real processes.
    let servers = [
        ServeProcess::start(&[]),
        ServeProcess::start(&[]),
        ServeProcess::start(&["--flaky-latency-ms", "40"]),
    ];
    let runtime = rt();
    let t = TestHost::new();
    for name in [
        "least-active",
        "p2c-ewma",
        "shortest-response",
        "least-active-c",
    ] {
        let _in = runtime.enter();
        let mut m = axle::manifest::Manifest::embedded().unwrap();
        m.endpoints.clear();
        // The C example, from its own file, beside the built-in ones.
        let c = example_component("c", "least-active");
        m.plugins.insert(
            "least-active-c".into(),
            PluginSpec::new(
                "least-active-c",
                PluginKind::Selector,
                ComponentSource::File(c),
            ),
        );
        m.services.entry("flaky".into()).or_default().selector = Some(name.into());
        let endpoints = servers.iter().map(|s| EndpointSpec::new(&s.addr));
        let client = Client::new(
            &t.host,
            axle::client::ClientConfig::new(m).endpoints("flaky", endpoints),
        )
        .unwrap();
        let plugin_calls = || {
            client
                .plugin_stats()
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.calls)
                .expect("the selector's counters")
        };
        let asked_before = plugin_calls();
        let before: Vec<u64> = servers.iter().map(|s| calls_at(&client, &s.addr)).collect();
        // 16 callers, 60 calls each, every call awaited: the slow provider's calls stay
        // in flight for 40 ms, long enough to lose nearly every duel they are in.
        let failed: u64 = runtime.block_on(async {
            let callers: Vec<_> = (0..16)
                .map(|_| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        let mut failed = 0;
                        for _ in 0..60 {
                            let body = bytes::Bytes::new();
                            let options = CallOptions::default();
                            if client.call_raw("flaky", "x", body, &options).await.is_err() {
                                failed += 1;
                            }
                        }
                        failed
                    })
                })
                .collect();
            let mut failed = 0;
            for caller in callers {
                failed += caller.await.expect("a caller finished");
            }
            failed
        });
        assert_eq!(failed, 0, "{name}: every call answered");
        let calls: Vec<u64> = servers
            .iter()
            .zip(&before)
            .map(|(s, b)| calls_at(&client, &s.addr) - b)
            .collect();
        let total: u64 = calls.iter().sum();
        assert_eq!(total, 960, "{name}: {calls:?}");
        // Round-robin would send it a third (320); a least-loaded pick, a few.
        assert!(
            calls[2] * 10 < total,
            "{name}: the slow provider took {calls:?}"
        );
        // The shipped three draw two pairs a call (`two-choice-run-selector`), each pair
        // compared when a call takes it; the C example, one pair a call.
        let asked = plugin_calls() - asked_before;
        if name.ends_with("-c") {
            assert!(asked >= total, "{name}: {asked} plugin calls");
        } else {
            assert!(
                asked * 10 <= total * 6,
                "{name}: {asked} plugin calls for {total} picks"
            );
        }
    }
}

#[test]
fn a_two_choice_selector_that_traps_on_the_request_path_costs_no_call() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let runtime = rt();
    let _in = runtime.enter();
    let t = TestHost::new();
    // Asked for one pair a pick, and for runs of pairs (`select-two-run`, whose draws
    // trap the same way).
    for (fixture, runs) in [
        ("axle_fixture_two_choice", false),
        ("axle_fixture_two_choice_runs", true),
    ] {
        let client = echo_client(&t, &servers, built_component(fixture), "trap");
        let before: Vec<u64> = servers.iter().map(|s| calls_at(&client, &s.addr)).collect();
        // Every pick traps (calls carry no hash key): 16 callers × 50 echo calls, each
        // answered through the kernel's random fallback while the instance is replaced.
        let (ok, failed) =
            axle_host_tests::drive_echo(&runtime, &client, 16, 50, "trap", |_, _| {
                CallOptions::default()
            });
        assert_eq!((ok, failed), (800, 0), "{fixture}");
        let stats = axle_host_tests::plugin_stats(&client, "two");
        assert!(stats.traps >= 1, "{fixture}: {stats:?}");
        let spread: Vec<u64> = servers
            .iter()
            .zip(&before)
            .map(|(s, b)| calls_at(&client, &s.addr) - b)
            .collect();
        assert!(
            spread.iter().all(|&c| c > 100),
            "{fixture}: random fallback: {spread:?}"
        );
        // The world each was built in: asked for runs of pairs or not.
        let path = built_component(fixture);
        let loaded = t
            .load(
                &manifest("two", "selector", path.to_str().unwrap(), ""),
                "two",
            )
            .unwrap();
        assert_eq!(selector(&loaded).pairs(), runs, "{fixture}");
    }
}

/// The kernel asks a run-selector for several runs in one hold of its lock. A fault on a
/// later call of an ask ends the ask, and the runs already drawn are served, each pick
/// still the plugin's: on the request path against real providers, every call is
/// answered and the plugin is not quarantined; and counted pick by pick from the
/// runtime's workers, only the picks made while a trapped instance was being replaced
/// are the kernel's (no trap costs a pick).
#[test]
fn a_fault_late_in_an_ask_of_runs_keeps_the_pairs_drawn_before_it() {
    let servers: Vec<ServeProcess> = (0..3).map(|_| ServeProcess::start(&[])).collect();
    let runtime = rt();
    let _in = runtime.enter();
    let t = TestHost::new();
    let path = built_component("axle_fixture_two_choice_runs");
    // Each instance answers three calls (six pairs) and traps on the fourth.
    let client = echo_client(&t, &servers, path.clone(), "trap-seventh");
    let (ok, failed) =
        axle_host_tests::drive_echo(&runtime, &client, 16, 50, "trap-seventh", |_, _| {
            CallOptions::default()
        });
    assert_eq!((ok, failed), (800, 0));
    let stats = axle_host_tests::plugin_stats(&client, "two");
    // Each instance traps on the fourth call of its first ask (how many instances come
    // up in 800 calls is the machine's pace), one fault in four calls: no quarantine.
    assert!(stats.traps >= 1, "{stats:?}");
    assert_eq!(stats.trips, 0, "{stats:?}");

    // Pick by pick: the same plugin, its picks taken by tasks on the runtime's workers.
    let extra = "[plugins.two.config]\nmode = \"trap-seventh\"";
    let loaded = t
        .load(
            &manifest("two", "selector", path.to_str().unwrap(), extra),
            "two",
        )
        .unwrap();
    let loaded = std::sync::Arc::new(loaded);
    selector(&loaded).endpoints_changed(&table(&[100; 3]));
    selector(&loaded).define_set(0, vec![0, 1, 2]);
    // Picking until a few instances have trapped: after a kernel's pick (an instance
    // being replaced), a task waits a little so the replacement can come up.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let picks: Vec<(bool, u32)> = runtime.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (loaded, stop) = (loaded.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut picks = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let pick = selector(&loaded).select(0, 0).expect("a defined set");
                        picks.push((pick.by_plugin, pick.endpoint));
                        if pick.by_plugin {
                            tokio::task::yield_now().await;
                        } else {
                            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                        }
                    }
                    picks
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while loaded.stats.snapshot().traps < 5 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut picks = Vec::new();
        for task in tasks {
            picks.extend(task.await.expect("a picking task finished"));
        }
        picks
    });
    let stats = loaded.stats.snapshot();
    assert!(stats.traps >= 5, "{stats:?}");
    // The plugin's picks are its pair's, the set's first two members.
    let theirs = picks.iter().filter(|(by_plugin, _)| *by_plugin);
    assert!(
        theirs.clone().all(|&(_, endpoint)| endpoint < 2),
        "{picks:?}"
    );
    // The kernel's are one a fault that left no pick: while an instance was replaced,
    // and any fault other than the traps (none was expected). An ask voided by its
    // trap would add one each.
    let kernels = picks.len() - theirs.count();
    eprintln!("{} picks, {kernels} by the kernel: {stats:?}", picks.len());
    let others = stats.faults() - stats.traps;
    assert!(
        kernels as u64 <= stats.replacing + others,
        "{kernels} picks by the kernel: {stats:?}"
    );
}

/// An ask makes a component's next call only while it has taken less than a quarter of
/// one call's timeout, so a slow plugin holds its lock about as long as one call, where
/// four would keep every other thread waiting four times as long. With a timeout of
/// 360 ms (a quarter: 90 ms): a fast fixture is asked four times for the first pick, one
/// taking 200 ms a call once (the pick taken on a multi-thread runtime's worker, as a
/// request takes it). The margins both ways are wide, for a loaded machine: the ticks
/// that time the ask lag wall time by the ticker's late wake-ups.
#[test]
fn an_ask_of_a_slow_plugin_makes_one_call_where_a_fast_one_makes_four() {
    let runtime = rt();
    let t = TestHost::new();
    let path = built_component("axle_fixture_two_choice_runs");
    for (mode, calls) in [("pair", 4), ("slow", 1)] {
        let extra = format!("timeout-ms = 360\n[plugins.two.config]\nmode = \"{mode}\"");
        let loaded = t
            .load(
                &manifest("two", "selector", path.to_str().unwrap(), &extra),
                "two",
            )
            .unwrap();
        let loaded = std::sync::Arc::new(loaded);
        selector(&loaded).endpoints_changed(&table(&[100; 3]));
        selector(&loaded).define_set(0, vec![0, 1, 2]);
        let before = loaded.stats.snapshot().calls;
        let picker = loaded.clone();
        let task = runtime.spawn(async move { selector(&picker).select(0, 0) });
        let pick = runtime
            .block_on(task)
            .expect("the picking task finished")
            .expect("a defined set");
        assert!(pick.by_plugin, "{mode}: {pick:?}");
        let stats = loaded.stats.snapshot();
        assert_eq!(stats.calls - before, calls, "{mode}: {stats:?}");
        assert_eq!(stats.faults(), 0, "{mode}: {stats:?}");
    }
}
