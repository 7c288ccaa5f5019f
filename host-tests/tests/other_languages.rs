//! Plugins written in other WASI languages pass the same behavioural tests as their Rust
//! twins, through the same host: the WIT is the contract, not the Rust SDK.
//!
//! Every example is a round-robin selector (`plugins/examples/<lang>/round-robin`, built by
//! `cargo run --release -p xtask -- examples`): C, Python (componentize-py), and JS twice,
//! on QuickJS (componentize-qjs) and on StarlingMonkey (componentize-js). Each one is
//! loaded through the real plugin host, must behave like `plugins/selector-round-robin`,
//! must reject an unknown config key at load, and must pass `axle plugins check`.
//!
//! A second example, in C and in Python, is a two-choice selector
//! (`plugins/examples/<lang>/least-active`): it must draw by weight and let the kernel keep
//! the less loaded candidate, like `plugins/selector-least-active`, on the kernel's own
//! facts.
//!
//! The interpreted guests are big (1.5-18 MiB) and take seconds to compile, so these tests
//! share one host and artifact cache ([`SharedHost`]): each component compiles once per run.

use std::path::PathBuf;

use axle_host_tests::{
    assert_round_robin, axle_bin, example_component, manifest, plugin_picks, selector, table,
    SharedHost,
};

/// One example build: where it is and the manifest keys it loads with.
struct Example {
    /// The plugin name in the test manifests.
    name: &'static str,
    /// `<target>/<lang>-plugins/`.
    lang: &'static str,
    /// The file name without `.wasm`.
    file: &'static str,
    /// Extra plugin keys. Call budgets stay at [`manifest`]'s second. Memory: the Python
    /// and StarlingMonkey components start with 8-16 MiB of linear memory (their
    /// pre-initialised interpreter heap), QuickJS under 8 MiB, C and Rust well under 1 MiB;
    /// each gets a few times what it starts with.
    extra: &'static str,
}

const C: Example = Example {
    name: "rr-c",
    lang: "c",
    file: "round-robin",
    extra: "",
};
/// The two-choice examples.
const C_LEAST_ACTIVE: Example = Example {
    name: "la-c",
    lang: "c",
    file: "least-active",
    extra: "",
};
const PYTHON_LEAST_ACTIVE: Example = Example {
    name: "la-py",
    lang: "python",
    file: "least-active",
    extra: "memory-mib = 128",
};
const PYTHON: Example = Example {
    name: "rr-py",
    lang: "python",
    file: "round-robin",
    extra: "memory-mib = 128",
};
const QUICKJS: Example = Example {
    name: "rr-qjs",
    lang: "js",
    file: "round-robin",
    extra: "memory-mib = 32",
};
const STARLINGMONKEY: Example = Example {
    name: "rr-sm",
    lang: "js",
    file: "round-robin-sm",
    extra: "memory-mib = 128",
};

impl Example {
    fn component(&self) -> PathBuf {
        example_component(self.lang, self.file)
    }

    /// A manifest with this one plugin, and `config` (TOML lines) as its config table.
    fn manifest(&self, config: &str) -> String {
        let path = self.component();
        let mut extra = self.extra.to_string();
        if !config.is_empty() {
            extra.push_str(&format!("\n[plugins.{}.config]\n{config}", self.name));
        }
        manifest(self.name, "selector", path.to_str().unwrap(), &extra)
    }
}

fn behaves_like_the_rust_one(ex: &Example) {
    let p = SharedHost::get().load(&ex.manifest(""), ex.name).unwrap();
    assert_round_robin(&p);
}

fn rejects_unknown_config_keys_at_load(ex: &Example) {
    let msg = SharedHost::get()
        .load(&ex.manifest("speed = 3"), ex.name)
        .err()
        .expect("config rejected")
        .to_string();
    assert!(msg.contains("unknown key `speed`"), "{msg}");
}

fn axle_plugins_check_accepts(ex: &Example) {
    // Compiled into the shared cache first (a load of its own, or another test's), so the
    // `axle` process loads the artifact instead of compiling for seconds again.
    let host = SharedHost::get();
    host.load(&ex.manifest(""), ex.name).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    std::fs::write(&manifest_path, ex.manifest("")).unwrap();
    let out = std::process::Command::new(axle_bin())
        .args([
            "plugins",
            "check",
            "--manifest",
            manifest_path.to_str().unwrap(),
        ])
        .env("AXLE_CACHE_DIR", host.cache_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("1 of 1 plugins ok"), "{stdout}");
}

#[test]
fn c_round_robin_behaves_like_the_rust_one() {
    behaves_like_the_rust_one(&C);
}

#[test]
fn c_round_robin_rejects_unknown_config_keys_at_load() {
    rejects_unknown_config_keys_at_load(&C);
}

#[test]
fn axle_plugins_check_accepts_the_c_plugin() {
    axle_plugins_check_accepts(&C);
}

/// How many of `picks` picks from set 0 went to each of endpoints `0..n`.
fn picks_by_endpoint(p: &axle::plugin::LoadedPlugin, n: usize, picks: u64) -> Vec<u32> {
    plugin_picks(p, 0, n, picks)
}

/// The behaviour of `plugins/selector-least-active`, through the real host, with the
/// kernel's facts set by hand.
fn least_active_draws_by_weight_and_the_kernel_keeps_the_less_loaded(ex: &Example) {
    let shared = SharedHost::get();
    let host = shared.own_host();
    let facts = host.facts();
    for (id, weight) in [(0, 100), (1, 100), (2, 600)] {
        facts.register(id, weight);
    }
    let p = shared
        .load_into(&host, &ex.manifest("seed = 5"), ex.name)
        .unwrap();
    let s = selector(&p);
    let measure = s
        .measure()
        .expect("a two-choice selector declares its measure");
    assert!(measure.per_weight && !measure.latency, "{measure:?}");
    s.endpoints_changed(&table(&[100, 100, 600]));
    s.define_set(0, vec![0, 1, 2]);
    // Idle: every duel is a tie, the first draw is kept, so picks follow the weights:
    // 12.5 / 12.5 / 75 %, within 3 points.
    let c = picks_by_endpoint(&p, 3, 8_000);
    assert!((760..1_240).contains(&c[0]), "{c:?}");
    assert!((760..1_240).contains(&c[1]), "{c:?}");
    assert!((5_760..6_240).contains(&c[2]), "{c:?}");
    // Per unit of weight: 1 in flight on weight 100 costs more than 3 on 600, and 1 is
    // idle. So 0 wins no duel, 1 wins every duel it is in, and 2 only those against 0:
    // the pairs {0, 2}, drawn by weight, are 1/8 × 6/7 + 6/8 × 1/2 = 48 % of them.
    facts.get(0).unwrap().started();
    for _ in 0..3 {
        facts.get(2).unwrap().started();
    }
    let c = picks_by_endpoint(&p, 3, 3_000);
    assert_eq!(c[0], 0, "{c:?}");
    assert!((1_400..1_720).contains(&c[1]), "52 % expected: {c:?}");
    // A set of one member offers it alone.
    s.define_set(1, vec![2]);
    assert_eq!(plugin_picks(&p, 1, 3, 50), [0, 0, 50]);
    // Weight 0 is never drawn; a set of drained endpoints is served evenly (all idle
    // again, so every duel is a tie and the draws alone decide).
    facts
        .get(0)
        .unwrap()
        .finished(1_000, axle::spi::OutcomeClass::Success);
    for _ in 0..3 {
        facts
            .get(2)
            .unwrap()
            .finished(1_000, axle::spi::OutcomeClass::Success);
    }
    s.endpoints_changed(&table(&[0, 100, 0]));
    s.define_set(0, vec![0, 1, 2]);
    assert_eq!(picks_by_endpoint(&p, 3, 500), [0, 500, 0]);
    s.endpoints_changed(&table(&[0, 0, 0]));
    s.define_set(0, vec![0, 1, 2]);
    let even = picks_by_endpoint(&p, 3, 3_000);
    assert!(even.iter().all(|n| *n > 600), "{even:?}");
    assert_eq!(p.stats.snapshot().faults(), 0, "{:?}", p.stats.snapshot());
}

fn least_active_rejects_bad_config_at_load(ex: &Example) {
    rejects_unknown_config_keys_at_load(ex);
    let msg = SharedHost::get()
        .load(&ex.manifest("seed = -1"), ex.name)
        .err()
        .expect("a negative seed is refused")
        .to_string();
    assert!(
        msg.contains("key `seed`: expected a non-negative integer"),
        "{msg}"
    );
}

#[test]
fn c_least_active_draws_by_weight_and_the_kernel_keeps_the_less_loaded() {
    least_active_draws_by_weight_and_the_kernel_keeps_the_less_loaded(&C_LEAST_ACTIVE);
}

#[test]
fn c_least_active_rejects_bad_config_at_load() {
    least_active_rejects_bad_config_at_load(&C_LEAST_ACTIVE);
}

#[test]
fn axle_plugins_check_accepts_the_c_two_choice_plugin() {
    axle_plugins_check_accepts(&C_LEAST_ACTIVE);
}

#[test]
fn python_least_active_draws_by_weight_and_the_kernel_keeps_the_less_loaded() {
    least_active_draws_by_weight_and_the_kernel_keeps_the_less_loaded(&PYTHON_LEAST_ACTIVE);
}

#[test]
fn python_least_active_rejects_bad_config_at_load() {
    least_active_rejects_bad_config_at_load(&PYTHON_LEAST_ACTIVE);
}

#[test]
fn axle_plugins_check_accepts_the_python_two_choice_plugin() {
    axle_plugins_check_accepts(&PYTHON_LEAST_ACTIVE);
}

#[test]
fn python_round_robin_behaves_like_the_rust_one() {
    behaves_like_the_rust_one(&PYTHON);
}

#[test]
fn python_round_robin_rejects_unknown_config_keys_at_load() {
    rejects_unknown_config_keys_at_load(&PYTHON);
}

#[test]
fn axle_plugins_check_accepts_the_python_plugin() {
    axle_plugins_check_accepts(&PYTHON);
}

#[test]
fn js_quickjs_round_robin_behaves_like_the_rust_one() {
    behaves_like_the_rust_one(&QUICKJS);
}

#[test]
fn js_quickjs_round_robin_rejects_unknown_config_keys_at_load() {
    rejects_unknown_config_keys_at_load(&QUICKJS);
}

#[test]
fn axle_plugins_check_accepts_the_js_quickjs_plugin() {
    axle_plugins_check_accepts(&QUICKJS);
}

#[test]
fn js_starlingmonkey_round_robin_behaves_like_the_rust_one() {
    behaves_like_the_rust_one(&STARLINGMONKEY);
}

#[test]
fn js_starlingmonkey_round_robin_rejects_unknown_config_keys_at_load() {
    rejects_unknown_config_keys_at_load(&STARLINGMONKEY);
}

#[test]
fn axle_plugins_check_accepts_the_js_starlingmonkey_plugin() {
    axle_plugins_check_accepts(&STARLINGMONKEY);
}

/// `axle bench plugins` measures every example's `select` (the figures in
/// docs/authoring.md come from this command; no figure is asserted, only that each
/// example answered through the bench at every endpoint count).
#[test]
fn axle_bench_plugins_measures_every_example() {
    let examples = [
        C,
        C_LEAST_ACTIVE,
        PYTHON,
        PYTHON_LEAST_ACTIVE,
        QUICKJS,
        STARLINGMONKEY,
    ];
    let host = SharedHost::get();
    let mut text = String::new();
    for ex in &examples {
        host.load(&ex.manifest(""), ex.name).unwrap();
        text.push_str(&ex.manifest(""));
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    std::fs::write(&manifest_path, text).unwrap();
    let out = std::process::Command::new(axle_bin())
        .args(["bench", "plugins", "--json", "--manifest"])
        .arg(&manifest_path)
        .env("AXLE_CACHE_DIR", host.cache_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rows = report["plugins"].as_array().unwrap();
    for ex in &examples {
        let selects: Vec<f64> = rows
            .iter()
            .filter(|r| r["name"] == ex.name && r["function"] == "select")
            .map(|r| r["wasm_ns"].as_f64().unwrap())
            .collect();
        assert_eq!(selects.len(), 3, "{}: {rows:?}", ex.name);
        assert!(
            selects.iter().all(|ns| ns.is_finite() && *ns > 0.0),
            "{}: {selects:?}",
            ex.name
        );
    }
}

/// `axle bench plugins --languages` finds every built example on its own and puts the
/// same strategy side by side: one row per language, each with a call cost, an
/// instantiation time and both sizes (the built-in Rust one is always there).
#[test]
fn axle_bench_plugins_languages_has_a_row_per_language() {
    let examples = [
        (C, "C"),
        (PYTHON, "Python"),
        (QUICKJS, "JS QuickJS"),
        (STARLINGMONKEY, "JS StarlingMonkey"),
    ];
    let host = SharedHost::get();
    for (ex, _) in &examples {
        // Compiled into the shared cache first, as in `axle_plugins_check_accepts`.
        host.load(&ex.manifest(""), ex.name).unwrap();
    }
    let out = std::process::Command::new(axle_bin())
        .args(["bench", "plugins", "--languages", "--json"])
        .env("AXLE_CACHE_DIR", host.cache_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rows = report["rows"].as_array().unwrap();
    let languages: Vec<&str> = rows
        .iter()
        .map(|r| r["language"].as_str().unwrap())
        .collect();
    let mut expected = vec!["Rust"];
    expected.extend(examples.iter().map(|(_, language)| *language));
    assert_eq!(languages, expected, "{report}");
    assert!(report["missing"].as_array().unwrap().is_empty(), "{report}");
    for r in rows {
        for field in ["select_ns", "instantiate_us", "cached_load_ms"] {
            let v = r[field].as_f64().unwrap();
            assert!(v.is_finite() && v > 0.0, "{field}: {r}");
        }
        assert!(r["size_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(r["artifact_bytes"].as_u64().unwrap() > 0, "{r}");
    }
}
