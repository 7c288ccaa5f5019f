//! Outcomes reach a selector only when it exports `feedback` (the `learning-selector`
//! world), in batches of 64 from each thread; a plain selector gets no component call for
//! them and the kernel keeps none (`docs/performance.md`, "Outcomes only to who reads
//! them"). Through the real host with a fixture that picks what it heard last, and on the
//! real request path against a real provider.

use axle::client::{CallOptions, Client};
use axle::manifest::{ComponentSource, EndpointSpec, PluginKind, PluginSpec};
use axle::plugin::kinds::selector::FEEDBACK_BATCH;
use axle::spi::{Outcome, OutcomeClass};
use axle_host_tests::{built_component, manifest, rt, selector, table, ServeProcess, TestHost};

fn heard(endpoint: u32) -> Outcome {
    Outcome {
        endpoint,
        class: OutcomeClass::Success,
        latency_ns: 1_000,
    }
}

#[test]
fn a_learning_selector_hears_outcomes_in_full_batches() {
    let t = TestHost::new();
    let path = built_component("axle_fixture_learning");
    let p = t
        .load(
            &manifest("learning", "selector", path.to_str().unwrap(), ""),
            "learning",
        )
        .unwrap();
    let s = selector(&p);
    assert!(s.hears_outcomes());
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    // Nothing heard yet: no pick of its own, the kernel picks at random.
    assert!(!s.select(0, 0).unwrap().by_plugin);
    // One short of a batch: kept on this thread, not delivered.
    for _ in 1..FEEDBACK_BATCH {
        s.feedback(&heard(2));
    }
    assert!(!s.select(0, 0).unwrap().by_plugin);
    let calls = p.stats.snapshot().calls;
    // The batch is full: one call delivers it, and the plugin picks what it heard last.
    s.feedback(&heard(1));
    assert_eq!(p.stats.snapshot().calls, calls + 1);
    for key in 0..20 {
        let pick = s.select(0, key).unwrap();
        assert!(pick.by_plugin, "{pick:?}");
        assert_eq!(pick.endpoint, 1);
    }
    assert_eq!(p.stats.snapshot().faults(), 0);
}

#[test]
fn a_selector_without_feedback_is_never_called_with_outcomes() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("rr", "selector", "builtin:round-robin", ""), "rr")
        .unwrap();
    let s = selector(&p);
    assert!(!s.hears_outcomes());
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    let calls = p.stats.snapshot().calls;
    for i in 0..10 * FEEDBACK_BATCH as u32 {
        s.feedback(&heard(i % 3));
    }
    assert_eq!(p.stats.snapshot().calls, calls, "no call for outcomes");
    assert!(s.select(0, 0).unwrap().by_plugin);
    // A rotation answers runs: its first pick is one ask, four `select-run` calls in a
    // row (`docs/performance.md`, "Four runs in one hold of the lock").
    assert_eq!(p.stats.snapshot().calls, calls + 4, "one ask for the pick");
}

/// `n` calls from 4 callers on a two-worker runtime to the one provider, through a client
/// whose `echo` service uses `selector`; the selector plugin's calls they made.
fn plugin_calls_for(n: u64, selector: &str, extra: Option<PluginSpec>) -> (u64, u64) {
    let server = ServeProcess::start(&[]);
    let runtime = rt();
    let _in = runtime.enter();
    let t = TestHost::new();
    let mut m = axle::manifest::Manifest::embedded().unwrap();
    m.endpoints.clear();
    if let Some(spec) = extra {
        m.plugins.insert(spec.name.clone(), spec);
    }
    m.services.entry("echo".into()).or_default().selector = Some(selector.into());
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("echo", [EndpointSpec::new(&server.addr)]),
    )
    .unwrap();
    let plugin_calls = || axle_host_tests::plugin_calls(&client, selector);
    let call = |n: u64| {
        runtime.block_on(async {
            let callers: Vec<_> = (0..4)
                .map(|_| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        for _ in 0..n / 4 {
                            let options = CallOptions::default();
                            client
                                .call_raw("echo", "say", bytes::Bytes::new(), &options)
                                .await
                                .expect("answered");
                        }
                    })
                })
                .collect();
            for caller in callers {
                caller.await.expect("a caller finished");
            }
        })
    };
    // Warm: the set is defined and the table pushed before counting.
    call(8);
    let before = plugin_calls();
    call(n);
    (n, plugin_calls() - before)
}

#[test]
fn on_the_request_path_only_a_learning_selector_is_called_for_outcomes() {
    // Two worker threads, each delivering a batch when 64 outcomes ended on it: at least
    // (n - 2 × 63) / 64 batches whatever the split.
    let learning = PluginSpec::new(
        "learning",
        PluginKind::Selector,
        ComponentSource::File(built_component("axle_fixture_learning")),
    );
    let (n, calls) = plugin_calls_for(800, "learning", Some(learning));
    let batches = calls - n;
    let least = (n - 2 * (FEEDBACK_BATCH as u64 - 1)) / FEEDBACK_BATCH as u64;
    assert!(
        (least..=n / FEEDBACK_BATCH as u64).contains(&batches),
        "{calls} plugin calls for {n} picks: {batches} batches"
    );
    // A plain selector: one call per pick, none for the outcomes (`consistent-hash`: a
    // rotation answers runs of picks, `docs/strategies.md`, "Runs").
    let (n, calls) = plugin_calls_for(800, "consistent-hash", None);
    assert_eq!(calls, n);
}
