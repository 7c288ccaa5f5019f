//! The native seam (`axle::plugin::native`): a host given `host_natives()` runs the shipped
//! limiters' twins in place of their components, and a twin answers what its component
//! answers, through the same `LimiterPlugin` (key interning, replay, `release`, provider
//! counts, state handoff). `axle bench rpc`'s `axle-native` row stands on this: its
//! wasm-vs-native ratio is the boundary's cost only if the twin is the same strategy.

use axle::manifest::{ComponentSource, PluginKind, PluginSpec};
use axle::plugin::{LoadedPlugin, Plugin, PluginHost};
use axle::spi::{Admission, LimitKey};

fn hosts() -> (tempfile::TempDir, PluginHost, PluginHost) {
    let cache = tempfile::tempdir().expect("temp dir");
    let wasm = PluginHost::new(Some(cache.path().to_path_buf())).expect("plugin host");
    let native = PluginHost::new(Some(cache.path().to_path_buf()))
        .expect("plugin host")
        .with_natives(axle_bench::native::host_natives());
    (cache, wasm, native)
}

fn spec(name: &str, config: &str) -> PluginSpec {
    PluginSpec {
        config: toml::from_str(config).expect("config"),
        timeout_ms: 1000,
        ..PluginSpec::new(
            name,
            PluginKind::Limiter,
            ComponentSource::Builtin(name.into()),
        )
    }
}

fn limiter(p: &LoadedPlugin) -> &axle::plugin::kinds::limiter::LimiterPlugin {
    match &p.plugin {
        Plugin::Limiter(l) => l,
        _ => panic!("{} is not a limiter", p.name),
    }
}

fn key(service: &str) -> LimitKey {
    LimitKey {
        service: service.into(),
        method: "call".into(),
        consumer_app: String::new(),
        consumer_ip: "127.0.0.1".into(),
    }
}

/// Admitted or not, for each of `n` acquires of one permit under `service`'s key (the
/// retry-after is left out: it follows the clock, read at slightly different times).
fn admits(p: &LoadedPlugin, service: &str, n: usize) -> Vec<bool> {
    let l = limiter(p);
    let id = l.key_id(&key(service));
    (0..n)
        .map(|_| {
            let a = l.acquire(id, 1);
            assert!(a.by_plugin, "{}: answered by the plugin", p.name);
            a.admission == Admission::Admit
        })
        .collect()
}

/// Loads `name` with `config` from both hosts: the component, then the twin.
fn both(name: &str, config: &str) -> (LoadedPlugin, LoadedPlugin) {
    let (_cache, wasm, native) = hosts();
    let component = wasm.load(&spec(name, config)).expect("component");
    let twin = native.load(&spec(name, config)).expect("twin");
    assert!(component.report.size_bytes > 0, "the component was loaded");
    assert_eq!(
        twin.report.size_bytes, 0,
        "{name}: the twin answers, no component"
    );
    (component, twin)
}

#[test]
fn a_rate_limiters_twin_admits_what_its_component_admits() {
    for name in ["token-bucket", "sliding-window"] {
        // One a second: the burst of five (or the window's five) goes, the rest is
        // refused for seconds, far longer than the test takes.
        let config = if name == "token-bucket" {
            "rate = 1\nburst = 5"
        } else {
            "rate = 1\nwindow-ms = 5000"
        };
        let (component, twin) = both(name, config);
        let expected = admits(&component, "orders", 12);
        assert_eq!(
            expected.iter().filter(|a| **a).count(),
            5,
            "{name}: {expected:?}"
        );
        assert_eq!(admits(&twin, "orders", 12), expected, "{name}");
        // Keys are the kernel's: a second key starts afresh in both.
        assert_eq!(
            admits(&twin, "billing", 3),
            admits(&component, "billing", 3)
        );
    }
}

#[test]
fn a_concurrency_limiters_twin_hears_every_release() {
    let (component, twin) = both("adaptive-concurrency", "initial-limit = 4\nmin-limit = 4");
    for p in [&component, &twin] {
        let l = limiter(p);
        assert!(l.wants_release(), "{}", p.name);
        let id = l.key_id(&key("orders"));
        // Four in flight fill the limit; the fifth waits for a release.
        let first: Vec<bool> = (0..5)
            .map(|_| l.acquire(id, 1).admission == Admission::Admit)
            .collect();
        assert_eq!(first, [true, true, true, true, false], "{}", p.name);
        l.release(id, 1, 1_000_000, false);
        assert_eq!(l.acquire(id, 1).admission, Admission::Admit, "{}", p.name);
    }
}

#[test]
fn a_cluster_limiters_twin_takes_its_share_of_the_providers() {
    let (_cache, wasm, native) = hosts();
    let mut seen = Vec::new();
    for host in [&wasm, &native] {
        // 20 a second for the cluster, four providers: each takes a quarter of the burst.
        host.cluster().set("orders", 4);
        let p = host
            .load(&spec("cluster-rate", "rate = 1\nburst = 20"))
            .expect("cluster-rate");
        assert!(!limiter(&p).wants_release());
        let admitted = admits(&p, "orders", 20).iter().filter(|a| **a).count();
        seen.push(admitted);
    }
    assert_eq!(seen[0], seen[1], "component, twin: {seen:?}");
    assert!(seen[0] < 20, "a share, not the whole burst: {seen:?}");
}

#[test]
fn a_twins_state_goes_to_the_next_version_as_a_components_does() {
    let (_cache, _wasm, native) = hosts();
    let old = native
        .load(&spec("token-bucket", "rate = 1\nburst = 3"))
        .expect("twin");
    assert_eq!(admits(&old, "orders", 4), [true, true, true, false]);
    let state = limiter(&old)
        .export_state()
        .expect("a token bucket hands over");
    let new = native
        .load(&spec("token-bucket", "rate = 1\nburst = 3"))
        .expect("twin");
    assert!(limiter(&new).import_state(&state));
    // The emptied bucket came along: nothing left to admit.
    assert_eq!(admits(&new, "orders", 1), [false]);
}

#[test]
fn a_twin_hands_state_over_only_where_its_component_does() {
    let configs = [
        ("token-bucket", "rate = 1"),
        ("sliding-window", "rate = 1"),
        ("adaptive-concurrency", ""),
        ("cluster-rate", "rate = 1"),
    ];
    for (name, config) in configs {
        let (component, twin) = both(name, config);
        let (c, t) = (limiter(&component), limiter(&twin));
        assert_eq!(
            c.export_state().is_some(),
            t.export_state().is_some(),
            "{name}: export-state"
        );
        assert_eq!(
            c.import_state(&[]),
            t.import_state(&[]),
            "{name}: import-state"
        );
    }
}
