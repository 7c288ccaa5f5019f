//! Governance settings in three tiers — `[governance]` (global), `[services.<s>.governance]`
//! (service), `[services.<s>.methods.<m>]` (method) — the more specific winning, key by key.
//!
//! Every key, its type, its default and its bounds are declared once, in the table below;
//! the layer that parses a tier, the resolved settings, the defaults and the rows of
//! `axle config explain` are all generated from it.

use serde::Deserialize;
use std::fmt;

/// Where an effective value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Default,
    Global,
    Service,
    Method,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Default => "default",
            Tier::Global => "global",
            Tier::Service => "service",
            Tier::Method => "method",
        })
    }
}

/// A fallback: what a call answers when it finally fails.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub enum Fallback {
    /// A static value (JSON-like TOML), answered as is.
    Value(toml::Value),
    /// Another `service/method`, called with the same request.
    Call(String),
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Value(v) => write!(f, "value {v}"),
            Fallback::Call(target) => write!(f, "call {target}"),
        }
    }
}

/// Business error codes (`retry-on-business = ["conflict", "stale-read"]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Codes(pub Vec<String>);

impl Codes {
    /// Whether `code` is one of them.
    pub fn contains(&self, code: &str) -> bool {
        self.0.iter().any(|c| c == code)
    }

    fn validate(&self) -> Result<(), String> {
        match self.0.iter().find(|c| c.is_empty() || c.len() > 128) {
            Some(c) => Err(format!("codes are 1 to 128 characters (got {c:?})")),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Codes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

/// Checks a number against inclusive bounds.
fn within<T: PartialOrd + fmt::Display>(v: T, lo: T, hi: T) -> Result<(), String> {
    if v < lo || v > hi {
        Err(format!("must be between {lo} and {hi} (got {v})"))
    } else {
        Ok(())
    }
}

macro_rules! governance {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $default:expr, $key:literal, check $check:expr; )*) => {
        /// One tier as written: every key optional.
        #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct TierSettings {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
            /// What a finally failed call answers (none: the error).
            pub fallback: Option<Fallback>,
        }

        /// The effective settings of one service/method.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Governance {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            /// What a finally failed call answers (none: the error).
            pub fallback: Option<Fallback>,
        }

        impl Default for Governance {
            fn default() -> Self {
                Governance { $( $field: $default, )* fallback: None }
            }
        }

        impl TierSettings {
            /// Checks every value present; the error names the key.
            pub fn validate(&self) -> Result<(), (&'static str, String)> {
                $(
                    if let Some(v) = &self.$field {
                        let check: fn(&$ty) -> Result<(), String> = $check;
                        check(v).map_err(|e| ($key, e))?;
                    }
                )*
                if let Some(Fallback::Call(target)) = &self.fallback {
                    if target.split_once('/').is_none_or(|(s, m)| s.is_empty() || m.is_empty()) {
                        return Err(("fallback", format!("call takes \"service/method\" (got {target:?})")));
                    }
                }
                Ok(())
            }
        }

        /// Every key of a tier as written: its name, its Rust type and its doc (for the
        /// manifest's JSON Schema, so the schema never lists a key this struct lacks).
        pub const KEYS: &[(&str, &str, &str)] = &[
            $( ($key, stringify!($ty), concat!($($doc),*)), )*
        ];

        /// Resolves the tiers, most general first, remembering where each value came from.
        pub fn resolve(tiers: &[(Tier, &TierSettings)]) -> (Governance, Vec<(&'static str, String, Tier)>) {
            let mut g = Governance::default();
            let mut rows = Vec::new();
            $(
                let mut tier = Tier::Default;
                for (t, layer) in tiers {
                    if let Some(v) = &layer.$field {
                        g.$field = v.clone();
                        tier = *t;
                    }
                }
                rows.push(($key, format!("{}", g.$field), tier));
            )*
            let mut tier = Tier::Default;
            for (t, layer) in tiers {
                if let Some(v) = &layer.fallback {
                    g.fallback = Some(v.clone());
                    tier = *t;
                }
            }
            rows.push(("fallback", g.fallback.as_ref().map_or("none".to_string(), |f| f.to_string()), tier));
            (g, rows)
        }
    };
}

governance! {
    /// The whole call's budget, shared by every attempt (ms).
    timeout_ms: u64 = 1000, "timeout-ms", check |v| within(*v, 1, 3_600_000);
    /// The selector plugin (shunt strategy) for these calls; empty: the service's selector slot.
    selector: String = String::new(), "selector", check |v| if v.is_empty() { Ok(()) } else { axle_core::validate::name("plugin name", v) };
    /// Extra attempts after the first (only for classes that are safe to retry).
    retries: u32 = 2, "retries", check |v| within(*v, 0, 10);
    /// Wait before the first retry (ms); doubles per retry, with jitter, never past the deadline.
    retry_interval_ms: u64 = 0, "retry-interval-ms", check |v| within(*v, 0, 60_000);
    /// Retries may be at most this share of requests (per service; Finagle's 20%).
    retry_budget_ratio: f64 = 0.2, "retry-budget-ratio", check |v| within(*v, 0.0, 1.0);
    /// ... plus this many retries per second whatever the traffic.
    retry_budget_min_per_s: f64 = 10.0, "retry-budget-min-per-s", check |v| within(*v, 0.0, 100_000.0);
    /// Most failovers per call: attempts sent elsewhere after `overloaded`, `shutting_down`,
    /// a refused connect or a draining connection. Failovers after a provider's refusal
    /// also draw on the retry budget, so cluster-wide overload cannot multiply the load by
    /// the number of endpoints.
    max_failovers: u32 = 2, "max-failovers", check |v| within(*v, 0, 100);
    /// Safe to run twice: timeouts, resets and internal errors after sending may be retried.
    idempotent: bool = false, "idempotent", check |_| Ok(());
    /// Send a backup request after this long without an answer (ms; 0 = off; idempotent only).
    hedge_delay_ms: u64 = 0, "hedge-delay-ms", check |v| within(*v, 0, 60_000);
    /// Business errors whose code says "try again" (a provider's `error-code`): retried on
    /// another endpoint like a failure, for idempotent or deduplicated methods only.
    retry_on_business: Codes = Codes::default(), "retry-on-business", check Codes::validate;
    /// Provider: remember the requests this method ran, by request id, for this long (ms;
    /// 0 = off) and answer a repeat from memory, so a retried call runs at most once per
    /// provider. Caller: a non-idempotent method may then be retried when its answer was
    /// lost, at the same endpoint (docs/governance.md).
    dedup_ttl_ms: u64 = 0, "dedup-ttl-ms", check |v| within(*v, 0, 86_400_000);
    /// Provider: most requests the deduplication table remembers per method.
    dedup_max_entries: u32 = 10_000, "dedup-max-entries", check |v| within(*v, 1, 10_000_000);
    /// Provider: most answer bytes the deduplication table holds per method.
    dedup_max_bytes: u64 = 64 << 20, "dedup-max-bytes", check |v| within(*v, 1024, 1 << 40);
    /// Count every call (the caller's per-method counters, the provider's per-method
    /// stats); `false` stops that counting, while health and breakers keep working
    /// (global tier).
    monitor: bool = true, "monitor", check |_| Ok(());
    /// Caller: keep a successful answer this long and answer the same request (method,
    /// content type, encoded bytes) from memory (ms; 0 = off). Method tier, idempotent
    /// methods only: a cached answer means the handler does not run.
    cache_ttl_ms: u64 = 0, "cache-ttl-ms", check |v| within(*v, 0, 86_400_000);
    /// Caller: most answers the method's cache holds (the oldest goes first).
    cache_max_entries: u32 = 1000, "cache-max-entries", check |v| within(*v, 1, 1_000_000);
    /// Payload compression on both sides' transport: "off" or "lz4". Sent compressed only
    /// to a peer that said it accepts the encoding (docs/wire.md); global tier.
    compression: String = "off".to_string(), "compression", check |v| match v.as_str() {
        "off" | "lz4" => Ok(()),
        other => Err(format!("\"off\" or \"lz4\" (got {other:?})")),
    };
    /// Payloads smaller than this travel uncompressed (bytes; global tier).
    compression_min_bytes: u64 = 1024, "compression-min-bytes", check |v| within(*v, 0, 1 << 32);
    /// Circuit breaking on or off.
    breaker: bool = true, "breaker", check |_| Ok(());
    /// Consecutive failures that open the breaker.
    breaker_consecutive_failures: u32 = 5, "breaker-consecutive-failures", check |v| within(*v, 1, 1_000_000);
    /// Failure rate over the window that opens the breaker.
    breaker_failure_rate: f64 = 0.5, "breaker-failure-rate", check |v| within(*v, 0.01, 1.0);
    /// Slow-call rate over the window that opens the breaker.
    breaker_slow_rate: f64 = 1.0, "breaker-slow-rate", check |v| within(*v, 0.01, 1.0);
    /// A call slower than this counts as slow (ms; 0 = slow calls are not counted).
    breaker_slow_call_ms: u64 = 0, "breaker-slow-call-ms", check |v| within(*v, 0, 3_600_000);
    /// Calls in the window before rates can open the breaker (Kitex: 200; smaller services need less).
    breaker_min_requests: u32 = 20, "breaker-min-requests", check |v| within(*v, 1, 1_000_000);
    /// The rate window (ms).
    breaker_window_ms: u64 = 10_000, "breaker-window-ms", check |v| within(*v, 100, 3_600_000);
    /// How long an open breaker fails fast before letting probes through (ms).
    break_ms: u64 = 5_000, "break-ms", check |v| within(*v, 1, 3_600_000);
    /// Probes a half-open breaker lets through; all must succeed to close it.
    half_open_probes: u32 = 3, "half-open-probes", check |v| within(*v, 1, 1000);
    /// Provider: requests handled at once per method (0 = unlimited); past it: `overloaded`.
    max_concurrent: u32 = 0, "max-concurrent", check |v| within(*v, 0, 1_000_000);
    /// Provider: unexpected errors in the fuse window that make a method reject (0 = off).
    fuse_errors: u32 = 0, "fuse-errors", check |v| within(*v, 0, 1_000_000);
    /// Provider: the fuse's window (ms).
    fuse_window_ms: u64 = 10_000, "fuse-window-ms", check |v| within(*v, 100, 3_600_000);
    /// Provider: how long a fused method rejects (ms).
    fuse_sleep_ms: u64 = 5_000, "fuse-sleep-ms", check |v| within(*v, 1, 3_600_000);
    /// Provider: answer `forbidden` to requests marked external.
    internal_only: bool = false, "internal-only", check |_| Ok(());
    /// Provider: the longest budget a request may bring (a longer one is cut to it, ms).
    max_deadline_ms: u64 = 60_000, "max-deadline-ms", check |v| within(*v, 1, 86_400_000);
    /// Provider: the budget of a request that brings none (ms).
    default_deadline_ms: u64 = 30_000, "default-deadline-ms", check |v| within(*v, 1, 86_400_000);
    /// Provider: cancel the handler when its caller's connection closes (nobody is left to
    /// read the answer); `false` lets it run to completion.
    cancel_on_disconnect: bool = true, "cancel-on-disconnect", check |_| Ok(());
    /// Health: unhealthy verdicts in a row before an endpoint is removed.
    unhealthy_times: u32 = 3, "unhealthy-times", check |v| within(*v, 1, 1000);
    /// Health: how long a removed endpoint sleeps before a probe may re-admit it (ms).
    readmit_sleep_ms: u64 = 30_000, "readmit-sleep-ms", check |v| within(*v, 1, 3_600_000);
    /// Health: how often the health scorer judges each endpoint's window (ms; global tier).
    health_interval_ms: u64 = 500, "health-interval-ms", check |v| within(*v, 10, 600_000);
    /// Health: a heartbeat goes to each connected endpoint this often (ms; global tier).
    heartbeat_interval_ms: u64 = 1000, "heartbeat-interval-ms", check |v| within(*v, 10, 600_000);
    /// Health: a heartbeat not answered within this long is lost (ms; global tier).
    heartbeat_timeout_ms: u64 = 1000, "heartbeat-timeout-ms", check |v| within(*v, 1, 600_000);
    /// Health: heartbeats lost in a row that make an endpoint unreachable (its connection is
    /// closed). Lost heartbeats making it subhealthy first is the scorer's decision.
    heartbeat_failures_dead: u32 = 3, "heartbeat-failures-dead", check |v| within(*v, 1, 1000);
    /// Health: at most this share of a service's endpoints may be ejected (%; service tier).
    max_ejection_percent: u32 = 50, "max-ejection-percent", check |v| within(*v, 0, 100);
    /// Health: at least this many endpoints stay in rotation when reachable (service tier).
    min_hosts: u32 = 1, "min-hosts", check |v| within(*v, 0, 1_000_000);
}

impl Governance {
    /// The call budget.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(text: &str) -> TierSettings {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn the_most_specific_tier_wins_key_by_key() {
        let global = layer("timeout-ms = 500\nretries = 1\nidempotent = true");
        let service = layer("retries = 4\nbreaker = false");
        let method = layer("retries = 0\nfallback = { value = \"cached\" }");
        // (tiers present, key, expected value, expected tier)
        type Case<'a> = (&'a [(Tier, &'a TierSettings)], &'a str, &'a str, Tier);
        let cases: &[Case] = &[
            (&[], "retries", "2", Tier::Default),
            (&[(Tier::Global, &global)], "retries", "1", Tier::Global),
            (
                &[(Tier::Global, &global), (Tier::Service, &service)],
                "retries",
                "4",
                Tier::Service,
            ),
            (
                &[
                    (Tier::Global, &global),
                    (Tier::Service, &service),
                    (Tier::Method, &method),
                ],
                "retries",
                "0",
                Tier::Method,
            ),
            (
                &[
                    (Tier::Global, &global),
                    (Tier::Service, &service),
                    (Tier::Method, &method),
                ],
                "timeout-ms",
                "500",
                Tier::Global,
            ),
            (
                &[
                    (Tier::Global, &global),
                    (Tier::Service, &service),
                    (Tier::Method, &method),
                ],
                "breaker",
                "false",
                Tier::Service,
            ),
            (
                &[
                    (Tier::Global, &global),
                    (Tier::Service, &service),
                    (Tier::Method, &method),
                ],
                "idempotent",
                "true",
                Tier::Global,
            ),
            (
                &[
                    (Tier::Global, &global),
                    (Tier::Service, &service),
                    (Tier::Method, &method),
                ],
                "break-ms",
                "5000",
                Tier::Default,
            ),
            (
                &[(Tier::Service, &service), (Tier::Method, &method)],
                "fallback",
                "value \"cached\"",
                Tier::Method,
            ),
            (
                &[(Tier::Service, &service)],
                "fallback",
                "none",
                Tier::Default,
            ),
        ];
        for (tiers, key, value, tier) in cases {
            let (_, rows) = resolve(tiers);
            let row = rows.iter().find(|r| r.0 == *key).unwrap();
            assert_eq!(
                (row.1.as_str(), row.2),
                (*value, *tier),
                "{key} with {} tiers",
                tiers.len()
            );
        }
    }

    #[test]
    fn impossible_values_name_the_key() {
        for (text, key) in [
            ("timeout-ms = 0", "timeout-ms"),
            ("retries = 11", "retries"),
            ("retry-on-business = [\"\"]", "retry-on-business"),
            ("dedup-max-entries = 0", "dedup-max-entries"),
            ("breaker-failure-rate = 1.5", "breaker-failure-rate"),
            ("fallback = { call = \"nomethod\" }", "fallback"),
        ] {
            let err = layer(text).validate().unwrap_err();
            assert_eq!(err.0, key, "{text}");
        }
        assert!(
            toml::from_str::<TierSettings>("retrys = 1").is_err(),
            "unknown keys fail"
        );
    }
}
