//! What the host needs to know of a plugin: its kind, where its component is, its limits
//! and config. The manifest crate fills these from `[plugins.<name>]`; tests and tools
//! build them directly.

use std::fmt;
use std::path::PathBuf;

/// The six plugin kinds (one WIT world each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    Serializer,
    Selector,
    Router,
    HealthScorer,
    Limiter,
    Interceptor,
}

impl PluginKind {
    /// The kind's name as written in manifests and WIT (`health-scorer`).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Serializer => "serializer",
            PluginKind::Selector => "selector",
            PluginKind::Router => "router",
            PluginKind::HealthScorer => "health-scorer",
            PluginKind::Limiter => "limiter",
            PluginKind::Interceptor => "interceptor",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a plugin's component comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComponentSource {
    /// Shipped inside the `axle` binary (`builtin:NAME`).
    Builtin(String),
    /// A file (relative paths are resolved against the manifest's directory).
    File(PathBuf),
}

impl fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::Builtin(name) => write!(f, "builtin:{name}"),
            ComponentSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One `[plugins.<name>]` entry, validated and with defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginSpec {
    /// The entry's name: what slots refer to.
    pub name: String,
    /// Its kind (the WIT world its component must implement).
    pub kind: PluginKind,
    /// Where the component is.
    pub component: ComponentSource,
    /// Longest a single call may run (ms).
    pub timeout_ms: u64,
    /// Most linear memory per instance (bytes).
    pub memory_bytes: u64,
    /// How many instances serve calls (see [`crate::defaults::instances`]).
    pub instances: u32,
    /// Limiters and interceptors: what a call gets when the plugin fails (`true`: admit,
    /// or pass; `false`: reject, or refuse).
    pub on_error_admit: bool,
    /// Interceptors only: whether it may read request payloads (`grant-payload`); one
    /// that declares it reads them does not load without this.
    pub grant_payload: bool,
    /// Limiters only: which consumer identities a key includes besides the method.
    pub key_on: KeyOn,
    /// A call that answers but takes longer than this is slow: counted and logged
    /// (0: not watched, and calls are not timed).
    pub slow_call_us: u64,
    /// Whether slow calls count toward quarantine like faults.
    pub quarantine_slow: bool,
    /// `[plugins.<name>.config]`, handed to the plugin's `init`.
    pub config: toml::Table,
}

impl PluginSpec {
    /// A plugin with what a manifest entry naming only its kind and component gets: the
    /// host's defaults and no config.
    pub fn new(name: impl Into<String>, kind: PluginKind, component: ComponentSource) -> Self {
        PluginSpec {
            name: name.into(),
            kind,
            component,
            timeout_ms: crate::defaults::CALL_TIMEOUT_MS,
            memory_bytes: crate::defaults::MEMORY_MIB << 20,
            instances: crate::defaults::instances(kind),
            on_error_admit: crate::defaults::LIMITER_ON_ERROR_ADMITS,
            grant_payload: false,
            key_on: KeyOn::default(),
            slow_call_us: 0,
            quarantine_slow: false,
            config: toml::Table::new(),
        }
    }
}

/// Which consumer identities a limiter's keys include (`key-on` in its manifest entry).
/// The method is always part of the key. The caller's IP is by default; its application
/// name only when asked, since a caller can name itself anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyOn {
    pub consumer_app: bool,
    pub consumer_ip: bool,
}

impl Default for KeyOn {
    fn default() -> Self {
        KeyOn {
            consumer_app: false,
            consumer_ip: true,
        }
    }
}
