//! The plugin host: loads WebAssembly components named by the manifest, checks them
//! against their kind's WIT world, and runs them sandboxed (no WASI grants, a deadline per
//! call, a memory limit per instance), with a safe default per kind when they fail.
//!
//! Layout: [`engine`] (wasmtime engine + epoch ticker), [`cache`] (compiled artifacts on
//! disk), [`sandbox`] (one instance and its fault handling), [`pool`] (how calls find an
//! instance), [`kinds`] (one file per plugin kind), and the specs and defaults it loads
//! them by (`spec`, [`defaults`]). Generated bindings stay private to this crate:
//! everything above it speaks `axle-spi` types.

mod bindings;
pub mod cache;
pub mod cluster;
pub mod compile_hook;
pub mod config;
mod convert;
pub mod defaults;
pub mod engine;
pub mod host_state;
pub mod kinds;
pub mod native;
pub mod pool;
mod post_return;
pub mod quarantine;
mod rebuild;
mod reload;
pub mod sandbox;
pub mod selfcheck;
pub mod shadow;
mod spec;
pub mod stats;
mod wasi;
mod wit_version;

use wasi::output::OutputBudget;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::Linker;
use wasmtime::Engine;

use axle_facts::FactsTable;
use cache::{ArtifactCache, Compiled};
pub use compile_hook::{CompileEvent, CompileHook};
use host_state::HostState;
use kinds::floor::FloorKind;
use kinds::health_scorer::{HealthScorerKind, HealthScorerPlugin};
use kinds::interceptor::{InterceptorKind, InterceptorPlugin};
use kinds::limiter::{LimiterKind, LimiterPlugin};
use kinds::router::{RouterKind, RouterPlugin};
use kinds::selector::{SelectorKind, SelectorPlugin};
use kinds::serializer::{SerializerKind, SerializerPlugin};
pub use reload::SwapReport;
use sandbox::{Instance, Kind, Prepared};
pub use spec::{ComponentSource, KeyOn, PluginKind, PluginSpec};
pub use stats::{Fault, InterceptCounts, PluginCounters, PluginStats, StatsSnapshot};

/// A plugin that could not be loaded: which, from where, why.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}` ({file}): {reason}")]
pub struct LoadError {
    /// The manifest name of the plugin.
    pub plugin: String,
    /// Its component (`builtin:NAME` or a path).
    pub file: String,
    /// What went wrong.
    pub reason: String,
}

/// What loading a plugin cost.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    /// Component size in bytes.
    pub size_bytes: usize,
    /// Whether the compiled artifact came from the cache.
    pub cache_hit: bool,
    /// Time spent compiling (or loading the cached artifact).
    pub compile: Duration,
    /// Size of the compiled artifact in the cache (`None` when there is no cache).
    pub artifact_bytes: Option<u64>,
    /// Time to instantiate and `init` one instance.
    pub instantiate: Duration,
    /// Instances running.
    pub instances: u32,
    /// BLAKE3 of the component's bytes (to notice a rebuilt file).
    #[serde(skip)]
    pub digest: [u8; 32],
}

impl LoadReport {
    /// A native twin's: nothing compiled, nothing instantiated, one instance.
    fn native() -> LoadReport {
        LoadReport {
            size_bytes: 0,
            cache_hit: false,
            compile: Duration::ZERO,
            artifact_bytes: None,
            instantiate: Duration::ZERO,
            instances: 1,
            digest: [0; 32],
        }
    }
}

/// A loaded plugin of any kind (shared: one plugin may fill slots of many services).
pub enum Plugin {
    Serializer(Arc<SerializerPlugin>),
    Selector(Arc<SelectorPlugin>),
    Router(Arc<RouterPlugin>),
    HealthScorer(Arc<HealthScorerPlugin>),
    Limiter(Arc<LimiterPlugin>),
    Interceptor(Arc<InterceptorPlugin>),
}

/// A loaded plugin with its name, report and counters.
pub struct LoadedPlugin {
    pub name: String,
    pub kind: PluginKind,
    pub plugin: Plugin,
    pub report: LoadReport,
    pub stats: Arc<PluginStats>,
}

/// The kernel's plugin host: one engine, one linker, one artifact cache, the facts the
/// `host` imports read.
pub struct PluginHost {
    engine: Engine,
    /// The engine's ticker's count, handed to every plugin beside the engine.
    ticks: engine::Ticks,
    linker: Linker<HostState>,
    cache: ArtifactCache,
    facts: Arc<FactsTable>,
    /// Providers per service, for limiters that share a cluster-wide rate (`cluster.rs`).
    cluster: Arc<cluster::ClusterView>,
    /// Told when a plugin must be compiled (a cache miss) and when that is done.
    compile_hook: Option<CompileHook>,
    /// Native twins to run in place of builtin components (none unless given).
    natives: native::Natives,
}

impl PluginHost {
    /// A host caching artifacts in `cache_dir` (`None`: never cache).
    pub fn new(cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let wasm = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
        let (engine, ticks) = engine::new_engine().map_err(wasm)?;
        let mut linker = Linker::new(&engine);
        // WASI p2 with nothing granted and nothing that waits (`wasi/`), for guests whose
        // toolchain imports it; then the kernel's own `host` interface.
        wasi::add_to_linker(&mut linker).map_err(wasm)?;
        bindings::base::axle::spi::host::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |s| s,
        )
        .map_err(wasm)?;
        let cache = ArtifactCache::new(&engine, cache_dir);
        Ok(PluginHost {
            engine,
            ticks,
            linker,
            cache,
            facts: FactsTable::new(),
            cluster: Arc::default(),
            compile_hook: None,
            natives: native::Natives::default(),
        })
    }

    /// Calls `hook` before and after each compile the cache cannot spare (a front end
    /// shows progress with it; loads from the cache say nothing).
    pub fn on_compile(mut self, hook: CompileHook) -> Self {
        self.compile_hook = Some(hook);
        self
    }

    /// Runs these native twins in place of the builtin components they name (`native.rs`:
    /// for measuring what the wasm boundary costs, not for serving).
    pub fn with_natives(mut self, natives: native::Natives) -> Self {
        self.natives = natives;
        self
    }

    /// A host using the default cache directory.
    pub fn with_default_cache() -> anyhow::Result<Self> {
        PluginHost::new(defaults::cache_dir())
    }

    /// The artifact cache (its directory, its engine key).
    pub fn cache(&self) -> &ArtifactCache {
        &self.cache
    }

    /// The facts behind `host.facts`.
    pub fn facts(&self) -> &Arc<FactsTable> {
        &self.facts
    }

    /// Providers per service, as the kernel feeds it (`axle serve`: from discovery),
    /// read by every limiter this host loads.
    pub fn cluster(&self) -> &Arc<cluster::ClusterView> {
        &self.cluster
    }

    /// Loads every plugin of a manifest's `[plugins]`, failing on the first that cannot
    /// load.
    pub fn load_all(
        &self,
        plugins: &BTreeMap<String, PluginSpec>,
    ) -> Result<BTreeMap<String, LoadedPlugin>, LoadError> {
        plugins
            .values()
            .map(|spec| Ok((spec.name.clone(), self.load(spec)?)))
            .collect()
    }

    /// Loads one plugin: bytes, compile (through the cache), check the world, instantiate
    /// its instances and `init` each with the config.
    pub fn load(&self, spec: &PluginSpec) -> Result<LoadedPlugin, LoadError> {
        let fail = |reason: String| LoadError {
            plugin: spec.name.clone(),
            file: spec.component.to_string(),
            reason,
        };
        let stats = Arc::new(match spec.kind {
            PluginKind::Interceptor => PluginStats::interceptor(&spec.name),
            _ => PluginStats::named(&spec.name),
        });
        let (plugin, report) = match spec.kind {
            PluginKind::Serializer => {
                let (instances, report) = self.instances::<SerializerKind>(spec, &stats)?;
                let plugin = SerializerPlugin::new(instances).map_err(|f| fail(f.to_string()))?;
                (Plugin::Serializer(Arc::new(plugin)), report)
            }
            PluginKind::Selector if self.native_selector(spec).is_some() => {
                let make = self.native_selector(spec).expect("checked above");
                let twin = make(&config::flatten(&spec.config)).map_err(fail)?;
                let owner = native_owner(spec, &stats);
                let plugin = SelectorPlugin::native(twin, owner, self.facts.clone());
                (Plugin::Selector(Arc::new(plugin)), LoadReport::native())
            }
            PluginKind::Selector => {
                let (instances, report) = self.instances::<SelectorKind>(spec, &stats)?;
                let plugin = SelectorPlugin::new(instances, self.facts.clone())
                    .map_err(|f| fail(format!("`measure` failed: {f}")))?;
                (Plugin::Selector(Arc::new(plugin)), report)
            }
            PluginKind::Router => {
                let (instances, report) = self.instances::<RouterKind>(spec, &stats)?;
                let plugin = RouterPlugin::new(instances)
                    .map_err(|f| fail(format!("`declare` failed: {f}")))?;
                (Plugin::Router(Arc::new(plugin)), report)
            }
            PluginKind::HealthScorer => {
                let (instances, report) = self.instances::<HealthScorerKind>(spec, &stats)?;
                (
                    Plugin::HealthScorer(Arc::new(HealthScorerPlugin::new(instances))),
                    report,
                )
            }
            PluginKind::Limiter if self.native_limiter(spec).is_some() => {
                let make = self.native_limiter(spec).expect("checked above");
                let twin = make(&config::flatten(&spec.config)).map_err(fail)?;
                let owner = native_owner(spec, &stats);
                let (admit, key_on) = (spec.on_error_admit, spec.key_on);
                let plugin =
                    LimiterPlugin::native(twin, owner, admit, key_on, self.cluster.clone());
                (Plugin::Limiter(Arc::new(plugin)), LoadReport::native())
            }
            PluginKind::Limiter => {
                let (instances, report) = self.instances::<LimiterKind>(spec, &stats)?;
                (
                    Plugin::Limiter(Arc::new(LimiterPlugin::new(
                        instances,
                        spec.on_error_admit,
                        spec.key_on,
                        self.cluster.clone(),
                    ))),
                    report,
                )
            }
            PluginKind::Interceptor => {
                let (instances, report) = self.instances::<InterceptorKind>(spec, &stats)?;
                let counts = stats.intercept.clone().unwrap_or_default();
                let plugin = InterceptorPlugin::new(
                    instances,
                    spec.grant_payload,
                    spec.on_error_admit,
                    counts,
                )
                .map_err(fail)?;
                (Plugin::Interceptor(Arc::new(plugin)), report)
            }
        };
        Ok(LoadedPlugin {
            name: spec.name.clone(),
            kind: spec.kind,
            plugin,
            report,
            stats,
        })
    }

    /// The native twin given for this selector's builtin component, if any.
    fn native_selector(&self, spec: &PluginSpec) -> Option<&native::MakeSelector> {
        builtin_name(spec).and_then(|name| self.natives.selector_for(name))
    }

    /// The native twin given for this limiter's builtin component, if any.
    fn native_limiter(&self, spec: &PluginSpec) -> Option<&native::MakeLimiter> {
        builtin_name(spec).and_then(|name| self.natives.limiter_for(name))
    }

    /// The floor component of `axle bench plugins`, as a live instance.
    pub fn floor(&self) -> Result<Instance<FloorKind>, LoadError> {
        let spec = PluginSpec::new(
            "floor",
            PluginKind::Selector,
            ComponentSource::Builtin("floor".into()),
        );
        let stats = Arc::new(PluginStats::named(&spec.name));
        let (mut instances, _) =
            self.instances_from::<FloorKind>(&spec, axle_builtins::floor().to_vec(), &stats)?;
        Ok(instances.remove(0))
    }

    fn instances<K: Kind>(
        &self,
        spec: &PluginSpec,
        stats: &Arc<PluginStats>,
    ) -> Result<(Vec<Instance<K>>, LoadReport), LoadError> {
        let bytes = match &spec.component {
            ComponentSource::Builtin(name) => axle_builtins::component(name)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| format!("no builtin component `{name}`")),
            ComponentSource::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read the file: {e}"))
            }
        }
        .map_err(|reason| LoadError {
            plugin: spec.name.clone(),
            file: spec.component.to_string(),
            reason,
        })?;
        self.instances_from::<K>(spec, bytes, stats)
    }

    fn instances_from<K: Kind>(
        &self,
        spec: &PluginSpec,
        bytes: Vec<u8>,
        stats: &Arc<PluginStats>,
    ) -> Result<(Vec<Instance<K>>, LoadReport), LoadError> {
        let fail = |reason: String| LoadError {
            plugin: spec.name.clone(),
            file: spec.component.to_string(),
            reason,
        };
        if !is_component(&bytes) {
            return Err(fail(
                "not a WebAssembly component (a core module or another file); build it for \
                 wasm32-wasip2 or wrap it with `wasm-tools component new`"
                    .into(),
            ));
        }
        let hook = self.compile_hook.as_deref();
        let compiling = std::cell::Cell::new(None);
        let loaded = self.cache.load_or_compile(&self.engine, &bytes, || {
            if let Some(hook) = hook {
                compiling.set(Some(Instant::now()));
                hook(CompileEvent::Started { plugin: &spec.name });
            }
        });
        if let (Some(hook), Some(started)) = (hook, compiling.get()) {
            hook(CompileEvent::Finished {
                plugin: &spec.name,
                ok: loaded.is_ok(),
                elapsed: started.elapsed(),
            });
        }
        let loaded = loaded.map_err(|e| fail(format!("does not compile: {e:#}")))?;
        wit_version::check(&self.engine, &loaded.component).map_err(fail)?;
        let pre = self
            .linker
            .instantiate_pre(&loaded.component)
            .map_err(|e| {
                fail(format!(
                    "imports something the kernel does not grant: {e:#}"
                ))
            })?;
        let pre = K::pre(pre, &bytes).map_err(|e| {
            fail(format!(
                "does not implement the `{}` world (wrong world or missing export): {e:#}",
                spec.kind
            ))
        })?;
        let prepared = Arc::new(Prepared::<K> {
            engine: self.engine.clone(),
            ticks: self.ticks.clone(),
            spec: spec.clone(),
            name: spec.name.as_str().into(),
            pre,
            config: convert::config(&config::flatten(&spec.config)),
            facts: self.facts.clone(),
            stats: stats.clone(),
        });
        let started = Instant::now();
        let first = prepared.instantiate().map_err(|f| fail(f.to_string()))?;
        let instantiate = started.elapsed();
        let mut instances = vec![Instance::new(prepared.clone(), first)];
        for _ in 1..spec.instances {
            let live = prepared.instantiate().map_err(|f| fail(f.to_string()))?;
            instances.push(Instance::new(prepared.clone(), live));
        }
        let report = LoadReport {
            size_bytes: bytes.len(),
            cache_hit: loaded.how == Compiled::CacheHit,
            compile: loaded.elapsed,
            artifact_bytes: loaded.artifact_bytes,
            instantiate,
            instances: spec.instances,
            digest: *blake3::hash(&bytes).as_bytes(),
        };
        Ok((instances, report))
    }
}

/// Whether a plugin's component file changed since it was loaded with `digest` (a rebuilt
/// `.wasm` at the same path). Builtins never change while the kernel runs; a file that
/// cannot be read now counts as unchanged (loading it would fail anyway).
pub fn component_changed(spec: &PluginSpec, digest: &[u8; 32]) -> bool {
    match &spec.component {
        ComponentSource::Builtin(_) => false,
        ComponentSource::File(path) => match std::fs::read(path) {
            Ok(bytes) => blake3::hash(&bytes).as_bytes() != digest,
            Err(_) => false,
        },
    }
}

/// `NAME` of a `builtin:NAME` component (a twin is never used for a file).
fn builtin_name(spec: &PluginSpec) -> Option<&str> {
    match &spec.component {
        ComponentSource::Builtin(name) => Some(name),
        ComponentSource::File(_) => None,
    }
}

/// The pool owner of a native twin: one member, the spec's name, counters and wait.
fn native_owner(spec: &PluginSpec, stats: &Arc<PluginStats>) -> pool::Owner {
    pool::Owner {
        name: spec.name.as_str().into(),
        stats: stats.clone(),
        timeout_ms: spec.timeout_ms,
    }
}

/// A component's preamble: `\0asm`, then version 0x0d and layer 1 (a core module has
/// layer 0). Checked first so a core module gets a message that says what to do.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[0..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}
