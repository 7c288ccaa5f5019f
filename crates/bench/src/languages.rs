//! `axle bench plugins --languages`: the same strategy, the round-robin selector, in every
//! language side by side: ns per `select`, instantiation, component size and compiled
//! artifact size. Rust is the shipped `builtin:round-robin`; the others are the examples
//! `xtask` builds into `<target>/<lang>-plugins/` (`cargo run --release -p xtask --
//! examples`). An example that is not built is skipped and reported as missing, so the
//! bench runs on a machine without Python or Node.js.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{ns_per_call, Budget};
use axle::manifest::Manifest;
use axle::plugin::selfcheck::sample_table;
use axle::plugin::{LoadError, Plugin, PluginHost};

/// Endpoints in the measured set (per-call cost does not grow with the set).
pub const ENDPOINTS: u32 = 10;

/// One language's round-robin build.
pub struct Example {
    /// What the table calls it.
    pub language: &'static str,
    /// `builtin:...` or a path relative to the target directory.
    pub component: &'static str,
    /// Extra manifest keys: interpreters start with megabytes of heap (docs/authoring.md).
    pub limits: &'static str,
    /// How to build it when it is missing.
    pub build: &'static str,
}

/// Every language, in the order of the table.
pub const EXAMPLES: [Example; 5] = [
    Example {
        language: "Rust",
        component: "builtin:round-robin",
        limits: "",
        build: "cargo build --release -p axle",
    },
    Example {
        language: "C",
        component: "c-plugins/round-robin.wasm",
        limits: "",
        build: "cargo run --release -p xtask -- c-plugins",
    },
    Example {
        language: "Python",
        component: "python-plugins/round-robin.wasm",
        limits: "memory-mib = 128\n",
        build: "cargo run --release -p xtask -- python-plugins",
    },
    Example {
        language: "JS QuickJS",
        component: "js-plugins/round-robin.wasm",
        limits: "memory-mib = 32\n",
        build: "cargo run --release -p xtask -- js-plugins",
    },
    Example {
        language: "JS StarlingMonkey",
        component: "js-plugins/round-robin-sm.wasm",
        limits: "memory-mib = 128\n",
        build: "cargo run --release -p xtask -- js-plugins",
    },
];

/// One measured language.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub language: String,
    pub component: String,
    /// Component size in bytes.
    pub size_bytes: usize,
    /// Compiled artifact size in the cache, in bytes (`None` without a cache).
    pub artifact_bytes: Option<u64>,
    /// The first load of this run: a compile, or a cache hit if an earlier run compiled it.
    pub first_load_cache_hit: bool,
    pub first_load_ms: f64,
    /// A second load: the artifact from the cache.
    pub cached_load_ms: f64,
    /// Instantiate and `init` one instance, on the second load.
    pub instantiate_us: f64,
    /// ns per `select` on a set of [`ENDPOINTS`].
    pub select_ns: f64,
}

/// A language whose example is not built.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Missing {
    pub language: String,
    pub component: String,
    pub build: String,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// An empty scalar component call, same run.
    pub floor_ns: f64,
    pub endpoints: u32,
    pub rows: Vec<Row>,
    pub missing: Vec<Missing>,
}

/// The target directory this binary was built in: where `xtask` puts the examples.
pub fn default_target_dir() -> PathBuf {
    PathBuf::from(axle_builtins::target_dir())
}

/// Measures every example found under `target_dir`.
pub fn run(host: &PluginHost, target_dir: &Path, budget: Budget) -> Result<Report, LoadError> {
    let mut floor = host.floor()?;
    let floor_ns = ns_per_call(budget, |i| {
        let _ = black_box(floor.call("noop", |b, s| b.call_noop(s, i)));
    });
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for ex in &EXAMPLES {
        let component = if ex.component.starts_with("builtin:") {
            ex.component.to_string()
        } else {
            let path = target_dir.join(ex.component);
            if !path.is_file() {
                missing.push(Missing {
                    language: ex.language.into(),
                    component: path.display().to_string(),
                    build: ex.build.into(),
                });
                continue;
            }
            path.display().to_string()
        };
        rows.push(measure(host, ex, &component, budget)?);
    }
    Ok(Report {
        floor_ns,
        endpoints: ENDPOINTS,
        rows,
        missing,
    })
}

fn measure(
    host: &PluginHost,
    ex: &Example,
    component: &str,
    budget: Budget,
) -> Result<Row, LoadError> {
    // The per-call deadline is wall time: a thread descheduled for a few ms on a busy
    // machine (or an interpreter's collector pausing) must not turn a timing loop into a
    // fault, so every language gets a second.
    let text = format!(
        "[plugins.rr]\nkind = \"selector\"\ncomponent = {component:?}\ntimeout-ms = 1000\n{}",
        ex.limits
    );
    let fail = |reason: String| LoadError {
        plugin: ex.language.into(),
        file: component.into(),
        reason,
    };
    let manifest = Manifest::parse(&text, "bench-languages", Path::new("/"))
        .map_err(|e| fail(e.to_string()))?;
    let spec = manifest
        .plugins
        .get("rr")
        .ok_or_else(|| fail("no plugin in the generated manifest".into()))?;
    let first = host.load(spec)?;
    let first_report = first.report.clone();
    drop(first);
    let loaded = host.load(spec)?;
    let Plugin::Selector(p) = &loaded.plugin else {
        return Err(fail("not a selector".into()));
    };
    p.endpoints_changed(&sample_table(1, ENDPOINTS));
    p.define_set(0, (0..ENDPOINTS).collect());
    let select_ns = ns_per_call(budget, |i| {
        black_box(p.select(0, i));
    });
    // A fault swaps in the safe default mid-loop: the figure is then not the plugin's.
    let faults = loaded.stats.snapshot().faults();
    if faults > 0 {
        return Err(fail(format!("faulted {faults} times while measured")));
    }
    let r = &loaded.report;
    Ok(Row {
        language: ex.language.into(),
        component: component.into(),
        size_bytes: r.size_bytes,
        artifact_bytes: r.artifact_bytes.or(first_report.artifact_bytes),
        first_load_cache_hit: first_report.cache_hit,
        first_load_ms: ms(first_report.compile),
        cached_load_ms: ms(r.compile),
        instantiate_us: r.instantiate.as_secs_f64() * 1e6,
        select_ns,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
