//! # axle-spi — the plugin interface as plain Rust types
//!
//! Plain Rust mirrors of the WIT types (`sdk/wit/*.wit`), shared by every plugin kind and by
//! both sides of the boundary: the guest SDK (`axle-sdk`) and the kernel (facts, health,
//! payloads). Only the plugin host sees the generated bindings, and converts at the edge.
//!
//! Plugins are written against these, not against generated bindings, so the same code
//! runs in a component and natively (tests, the kernel's native twins in `axle bench`).

mod balancing;
pub mod copy;
mod intercept;
pub mod lanes;
pub mod packed;
mod routing;
mod tree;
mod utf8;

pub use balancing::{
    mean_weight, next_in_run, next_pair_in_run, pack_pair, pack_run, run_len, unpack_pair,
    whole_pairs, Load, LoadMeasure, Pair, RUN, RUN_ID_LIMIT,
};
pub use intercept::{
    refusal_class, InterceptCall, InterceptDeclaration, InterceptPoint, InterceptReads,
    InterceptVerdict, Refusal, REFUSAL_CLASSES,
};
pub use routing::{RouteReads, RouteRequest, TagReads};
pub use tree::{Tree, MAX_DEPTH};
pub use utf8::{short_word, text as utf8_text};

/// An endpoint's id, assigned by the kernel.
pub type EndpointId = u32;

/// What a selector component's `select` answers for "no pick" (the kernel then picks at
/// random): the one id the kernel never gives an endpoint, so `select` returns a bare
/// scalar instead of an option returned through the plugin's memory (`sdk/wit/kinds.wit`).
pub const NO_PICK: EndpointId = EndpointId::MAX;

/// A candidate set's id, assigned by the kernel.
pub type SetId = u32;

/// The static facts of one endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Kernel-assigned id.
    pub id: EndpointId,
    /// `host:port`.
    pub address: String,
    /// Configured relative weight.
    pub weight: u32,
    /// Discovery tags.
    pub tags: Vec<(String, String)>,
}

impl Endpoint {
    /// The value of tag `key`, if the endpoint has it.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The endpoint table, pushed when it changes, indexed by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointTable {
    version: u64,
    endpoints: Vec<Endpoint>,
    by_id: std::collections::HashMap<EndpointId, usize>,
}

impl EndpointTable {
    /// Indexes a table (done once per change, so lookups by id are O(1)).
    pub fn new(version: u64, endpoints: Vec<Endpoint>) -> Self {
        let by_id = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id, i))
            .collect();
        EndpointTable {
            version,
            endpoints,
            by_id,
        }
    }

    /// Increases with every change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every endpoint, in the kernel's order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The endpoint with this id.
    pub fn get(&self, id: EndpointId) -> Option<&Endpoint> {
        self.by_id.get(&id).map(|&i| &self.endpoints[i])
    }
}

/// How a call ended, as far as an endpoint is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeClass {
    /// The handler ran and answered (business errors included).
    Success,
    /// Refused without running (overloaded, shutting down, rate limited).
    Rejected,
    /// Ran out of time at this endpoint.
    Timeout,
    /// Transport or internal failure.
    Failure,
}

/// One finished call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Where the call went.
    pub endpoint: EndpointId,
    /// What happened.
    pub class: OutcomeClass,
    /// Send-to-answer time in nanoseconds.
    pub latency_ns: u64,
}

/// Facts the kernel measures per endpoint (see `host::facts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointFacts {
    /// Requests sent and not yet answered.
    pub in_flight: u32,
    /// Latency EWMA in nanoseconds (0 before any call).
    pub ewma_latency_ns: u64,
    /// Effective weight now (configured × warm-up × health).
    pub weight: u32,
    /// Calls finished in the current window.
    pub window_total: u32,
    /// Endpoint faults in the current window.
    pub window_failures: u32,
    /// Nanoseconds since the endpoint joined the table.
    pub age_ns: u64,
}

/// Log levels for `host::log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One node of a serializer value, in pre-order (see `sdk/wit/kinds.wit`, interface `values`).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Null / nil.
    Null,
    /// A boolean.
    Boolean(bool),
    /// A signed integer.
    Signed(i64),
    /// An unsigned integer above `i64::MAX`.
    Unsigned(u64),
    /// A float.
    Float(f64),
    /// A string.
    Text(String),
    /// Raw bytes.
    Binary(Vec<u8>),
    /// An array of the next `n` subtrees.
    Array(u32),
    /// A map of the next `n` key/value subtree pairs.
    Mapping(u32),
}

/// A whole value as a flattened pre-order node list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Value {
    /// The nodes; the first is the root.
    pub nodes: Vec<Node>,
}

/// The three health states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HealthState {
    #[default]
    Healthy,
    Subhealthy,
    Dead,
}

/// One endpoint's window statistics, as the kernel measured them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// The endpoint scored.
    pub endpoint: EndpointId,
    /// Window length in milliseconds.
    pub window_ms: u32,
    /// Calls finished in the window.
    pub total: u32,
    /// Of those, timeouts.
    pub timeouts: u32,
    /// Of those, other endpoint faults.
    pub failures: u32,
    /// Of those, refusals without running (not faults).
    pub rejected: u32,
    /// Consecutive endpoint faults.
    pub consecutive_failures: u32,
    /// Consecutive heartbeat failures.
    pub heartbeat_failures: u32,
    /// Latency EWMA in nanoseconds.
    pub ewma_latency_ns: u64,
    /// This scorer's previous verdict.
    pub previous: HealthState,
}

/// A health verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The state from now on.
    pub state: HealthState,
    /// Weight factor in per-mille (1000 = unchanged).
    pub weight_permille: u32,
}

/// What a limiter key is made of.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LimitKey {
    /// Service name.
    pub service: String,
    /// Method name.
    pub method: String,
    /// Calling application ("" if unknown).
    pub consumer_app: String,
    /// Caller IP as text.
    pub consumer_ip: String,
}

/// A limiter's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead.
    Admit,
    /// Refused; retry after this many milliseconds.
    Reject { retry_after_ms: u32 },
}

/// How long a limiter's lease lasts on the kernel's clock (WIT `leasing-limiter`): the
/// kernel admits a lease's requests for at most this long after the plugin gave it.
pub const LEASE_NS: u64 = 1_000_000;

/// One config value (mirrors WIT `config-value`).
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigValue {
    Flag(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Texts(Vec<String>),
}

impl ConfigValue {
    /// What kind of value this is, for messages (`an integer`).
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigValue::Flag(_) => "a boolean",
            ConfigValue::Int(_) => "an integer",
            ConfigValue::Float(_) => "a float",
            ConfigValue::Text(_) => "a string",
            ConfigValue::Texts(_) => "an array",
        }
    }
}
