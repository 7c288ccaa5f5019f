//! Hostile plugins: each is bounded in time, isolated, reported, answered with the kind's
//! safe default, replaced — and the host goes on serving calls with the other plugins.

use axle_host_tests::{built_component, manifest, selector, table, TestHost};
use std::time::{Duration, Instant};

/// Generous: the plugins' deadline is 10 ms; this only proves "bounded".
const BOUND: Duration = Duration::from_secs(5);

fn fixture_manifest(name: &str, krate: &str, extra: &str) -> String {
    let path = built_component(krate);
    format!(
        "{}\n{}",
        manifest(name, "selector", path.to_str().unwrap(), extra),
        manifest("rr", "selector", "builtin:round-robin", "")
    )
}

/// Loads the fixture and a healthy round-robin side by side, makes the fixture misbehave
/// once, and checks everything the issue asks for.
fn misbehave_once(krate: &str, extra: &str) -> axle::plugin::StatsSnapshot {
    let t = TestHost::new();
    let text = fixture_manifest("bad", krate, extra);
    let bad = t.load(&text, "bad").unwrap();
    let good = t.load(&text, "rr").unwrap();
    for p in [&bad, &good] {
        let s = selector(p);
        s.endpoints_changed(&table(&[100; 3]));
        s.define_set(0, vec![0, 1, 2]);
    }

    let started = Instant::now();
    let answer = selector(&bad).select(0, 0).expect("a safe default");
    assert!(
        started.elapsed() < BOUND,
        "bounded in time: {:?}",
        started.elapsed()
    );
    assert!(!answer.by_plugin, "the kernel's random fallback answered");
    assert!(answer.endpoint < 3, "the fallback picks a member");

    // Isolated: the other plugin is untouched.
    let picks: Vec<u32> = (0..3)
        .map(|_| selector(&good).select(0, 0).unwrap().endpoint)
        .collect();
    assert_eq!(picks, [0, 1, 2]);
    assert_eq!(good.stats.snapshot().faults(), 0);

    // Replaced, off the request path: hash-key 1 makes the fixtures behave; the new
    // instance has the table and the set replayed, so it answers by itself.
    let again = replaced(selector(&bad));
    assert_eq!(again.endpoint, 0);
    bad.stats.snapshot()
}

/// Waits (bounded) for a replacement instance to answer by itself with hash-key 1; until
/// it is made, calls get the safe default at once.
fn replaced(
    s: &axle::plugin::kinds::selector::SelectorPlugin,
) -> axle::plugin::kinds::selector::Selection {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = s.select(0, 1).expect("an answer, safe default or not");
        if answer.by_plugin {
            return answer;
        }
        assert!(Instant::now() < until, "the instance was never replaced");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_plugin_that_loops_forever_is_interrupted() {
    let s = misbehave_once("axle_fixture_loop_forever", "timeout-ms = 10");
    assert_eq!((s.timeouts, s.replaced), (1, 1), "{s:?}");
}

#[test]
fn a_plugin_that_allocates_without_bound_hits_its_memory_limit() {
    let s = misbehave_once(
        "axle_fixture_unbounded_alloc",
        "memory-mib = 16\ntimeout-ms = 2000",
    );
    assert_eq!((s.memory, s.replaced), (1, 1), "{s:?}");
}

#[test]
fn a_plugin_that_traps_is_replaced() {
    let s = misbehave_once("axle_fixture_trap", "");
    assert_eq!((s.traps, s.replaced), (1, 1), "{s:?}");
}

#[test]
fn a_non_candidate_answer_is_replaced_by_a_member() {
    let t = TestHost::new();
    let p = t
        .load(
            &fixture_manifest("bad", "axle_fixture_non_candidate", ""),
            "bad",
        )
        .unwrap();
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    let mut seen = [0u32; 3];
    for i in 0..300 {
        let sel = s.select(0, i).unwrap();
        assert!(!sel.by_plugin);
        seen[sel.endpoint as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 50), "uniform fallback: {seen:?}");
    let stats = p.stats.snapshot();
    // Ten wrong answers in a row put it in quarantine: the rest skip it.
    assert_eq!(stats.invalid, 10);
    assert_eq!((stats.skipped, stats.trips), (290, 1));
    assert_eq!(
        stats.replaced, 0,
        "a wrong answer does not kill a working instance"
    );
}

#[test]
fn a_component_for_the_wrong_world_fails_to_load_with_a_reason() {
    let t = TestHost::new();
    let err = t
        .load(&manifest("oops", "selector", "builtin:tag", ""), "oops")
        .err()
        .expect("a router is not a selector");
    let msg = err.to_string();
    assert!(
        msg.contains("plugin `oops`") && msg.contains("builtin:tag"),
        "{msg}"
    );
    assert!(
        msg.contains("does not implement the `selector` world"),
        "{msg}"
    );
}

#[test]
fn files_that_are_not_components_fail_to_load_with_a_reason() {
    let t = TestHost::new();
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"definitely not wasm").unwrap();
    for path in [&core, &junk] {
        let text = manifest("x", "selector", path.to_str().unwrap(), "");
        let msg = t.load(&text, "x").err().unwrap().to_string();
        assert!(msg.contains("not a WebAssembly component"), "{msg}");
        assert!(
            msg.contains(path.to_str().unwrap()),
            "names the file: {msg}"
        );
    }
    let missing = manifest("x", "selector", "/nonexistent/x.wasm", "");
    let msg = t.load(&missing, "x").err().unwrap().to_string();
    assert!(msg.contains("cannot read the file"), "{msg}");
}

#[test]
fn a_bad_config_key_is_rejected_at_load_naming_the_key() {
    let t = TestHost::new();
    let text = manifest(
        "tb",
        "limiter",
        "builtin:token-bucket",
        "[plugins.tb.config]\nrate = 10\nburts = 5",
    );
    let msg = t.load(&text, "tb").err().unwrap().to_string();
    assert!(
        msg.contains("plugin `tb`") && msg.contains("unknown key `burts`"),
        "{msg}"
    );
}

#[test]
fn faults_are_counted_not_hidden() {
    // A trap on every call: each call is answered, counted, and the instance replaced.
    let t = TestHost::new();
    let p = t
        .load(&fixture_manifest("bad", "axle_fixture_trap", ""), "bad")
        .unwrap();
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 2]));
    s.define_set(0, vec![0, 1]);
    for i in 0..5 {
        if i > 0 {
            replaced(s);
        }
        assert!(s.select(0, 2 + i).is_some());
    }
    let stats = p.stats.snapshot();
    assert_eq!(stats.traps, 5);
    // An instance is replaced off the request path after each trap: four so far, the
    // fifth once it is made.
    assert_eq!(stats.replaced, 4);
    replaced(s);
    assert_eq!(p.stats.snapshot().replaced, 5);
}
