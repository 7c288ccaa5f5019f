//! A scenario file (`axle sim SCENARIO.toml`): the providers, the traffic and the fault
//! script, parsed and checked before anything runs. Every error names the key (and the
//! table index) it is about, so a typo in a 10,000-provider scenario is found at once.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A whole scenario, checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Scenario {
    /// Seeds every random draw (arrivals, latencies, faults, the plugins' `host.random`).
    #[serde(default = "one")]
    pub seed: u64,
    /// Virtual time simulated (seconds).
    pub duration_s: f64,
    /// The manifest whose plugins and governance decide (relative to the scenario file);
    /// the embedded defaults when absent.
    pub manifest: Option<PathBuf>,
    /// The service called.
    #[serde(default = "echo")]
    pub service: String,
    /// Caller processes, each its own kernel (facts, health verdicts, breakers, retry
    /// budget, plugin instances): requests go to them in turn (closed-loop workers are
    /// spread over them).
    #[serde(default = "one_u")]
    pub callers: u32,
    /// Width of a time-series bucket (ms).
    #[serde(default = "thousand")]
    pub sample_ms: u64,
    /// How long after a kill discovery drops the endpoint (its lease expiring), and after
    /// a restart lists it again (s). 0: a static list, nothing ever leaves it.
    #[serde(default)]
    pub discovery_ttl_s: f64,
    /// How long after a provider dies its callers' connections notice (ms): calls written
    /// into them meanwhile fail with a reset (the peer's RST answers the write), then the
    /// re-dial is refused and the endpoint is unreachable.
    #[serde(default = "close_ms")]
    pub connection_close_ms: f64,
    /// Endpoints reported one by one (besides the groups and the top ones).
    #[serde(default)]
    pub watch: Vec<String>,
    pub arrivals: Arrivals,
    #[serde(default)]
    pub requests: Vec<RequestKind>,
    pub providers: Vec<ProviderGroup>,
    #[serde(default)]
    pub faults: Vec<Fault>,
}

/// How requests arrive.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Arrivals {
    /// `constant` (evenly spaced), `poisson`, `bursts` (open: arrivals do not wait for
    /// answers), or `closed`: `workers` callers, each calling again `think-ms` after its
    /// previous call ended (as a load generator's tasks do).
    pub kind: ArrivalKind,
    /// Requests per second (between bursts for `bursts`); not for `closed`.
    #[serde(default)]
    pub rate_per_s: f64,
    /// `closed`: the number of callers.
    pub workers: Option<u32>,
    /// `closed`: the pause between a call's end and the caller's next call (ms).
    #[serde(default)]
    pub think_ms: f64,
    /// Stop after this many requests (the duration still bounds the run).
    pub max_requests: Option<u64>,
    /// `bursts`: the rate during a burst.
    pub burst_rate_per_s: Option<f64>,
    /// `bursts`: a burst starts every this many seconds...
    pub burst_every_s: Option<f64>,
    /// ... and lasts this long.
    pub burst_length_s: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalKind {
    Constant,
    Poisson,
    Bursts,
    Closed,
}

/// One kind of request in the mix.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RequestKind {
    /// Relative share of the mix.
    #[serde(default = "one_f")]
    pub weight: f64,
    #[serde(default = "say")]
    pub method: String,
    /// Request tags (routers read them).
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
    /// Distinct hash keys drawn uniformly (consistent-hash selectors); 0: none.
    #[serde(default)]
    pub hash_keys: u64,
}

/// A group of identical providers.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ProviderGroup {
    /// Group name; its endpoints are `NAME-0`, `NAME-1`, ...
    pub name: String,
    #[serde(default = "one_u")]
    pub count: u32,
    pub latency: Latency,
    /// Requests served at once; beyond it they queue (overload builds latency).
    #[serde(default = "hundred")]
    pub capacity: u32,
    pub zone: Option<String>,
    #[serde(default = "hundred")]
    pub weight: u32,
    /// Warm-up after (re)joining (s): a linear ramp of its weight, the kernel's.
    #[serde(default)]
    pub warmup_s: f64,
    /// Share of calls answered `internal` (a plain bug rate).
    #[serde(default)]
    pub error_rate: f64,
    /// Extra discovery tags.
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
}

/// A provider's service-time distribution.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case",
    deny_unknown_fields,
    tag = "kind"
)]
pub enum Latency {
    Constant {
        ms: f64,
    },
    Uniform {
        min_ms: f64,
        max_ms: f64,
    },
    /// Log-normal, given by its median and its 99th percentile.
    Lognormal {
        p50_ms: f64,
        p99_ms: f64,
    },
}

/// One step of the fault script.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Fault {
    pub at_s: f64,
    pub kind: FaultKind,
    /// The group it hits (every fault but `discovery-outage`).
    pub group: Option<String>,
    /// Only these members of the group (indexes); all of them when absent.
    pub members: Option<Vec<u32>>,
    /// Undone after this long (s); for ever when absent. For `kill`: restarted then.
    pub for_s: Option<f64>,
    /// `half-dead`: the share of calls that hang until the caller's deadline.
    pub share: Option<f64>,
    /// `slow`: latency multiplied by this.
    pub factor: Option<f64>,
    /// `overload`: capacity cut to this.
    pub capacity: Option<u32>,
    /// `rolling-restart`: one member after another, this far apart (s)...
    pub every_s: Option<f64>,
    /// ... each down this long (s).
    pub down_s: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    Kill,
    Restart,
    HalfDead,
    Slow,
    Partition,
    Overload,
    RollingRestart,
    DiscoveryOutage,
}

impl FaultKind {
    /// As written in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Restart => "restart",
            FaultKind::HalfDead => "half-dead",
            FaultKind::Slow => "slow",
            FaultKind::Partition => "partition",
            FaultKind::Overload => "overload",
            FaultKind::RollingRestart => "rolling-restart",
            FaultKind::DiscoveryOutage => "discovery-outage",
        }
    }
}

fn one() -> u64 {
    1
}
fn one_u() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn hundred() -> u32 {
    100
}
fn thousand() -> u64 {
    1000
}
fn close_ms() -> f64 {
    1.0
}
fn echo() -> String {
    "echo".into()
}
fn say() -> String {
    "say".into()
}

/// Most providers a scenario may have.
pub const MAX_PROVIDERS: u64 = 100_000;

impl Scenario {
    /// Reads and checks `path`; a relative `manifest` is made relative to it.
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut s =
            Scenario::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(m) = &s.manifest {
            if m.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                s.manifest = Some(base.join(m));
            }
        }
        Ok(s)
    }

    /// Parses and checks a scenario's text.
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        if s.requests.is_empty() {
            s.requests.push(RequestKind {
                weight: 1.0,
                method: say(),
                tags: Default::default(),
                hash_keys: 0,
            });
        }
        s.check()?;
        Ok(s)
    }

    /// The checks serde cannot make; each error names its key.
    fn check(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        positive("duration-s", self.duration_s)?;
        if self.duration_s > 86_400.0 {
            bail!(
                "duration-s: at most 86400 (one simulated day), got {}",
                self.duration_s
            );
        }
        if !(1..=256).contains(&self.callers) {
            bail!("callers: between 1 and 256, got {}", self.callers);
        }
        if self.sample_ms == 0 {
            bail!("sample-ms: must be at least 1");
        }
        non_negative("discovery-ttl-s", self.discovery_ttl_s)?;
        non_negative("connection-close-ms", self.connection_close_ms)?;
        let a = &self.arrivals;
        non_negative("arrivals.think-ms", a.think_ms)?;
        if a.kind == ArrivalKind::Closed {
            match a.workers {
                Some(w) if (1..=1_000_000).contains(&w) => {}
                Some(w) => bail!("arrivals.workers: between 1 and 1000000, got {w}"),
                None => bail!("arrivals.workers: required for kind = \"closed\""),
            }
        } else {
            positive("arrivals.rate-per-s", a.rate_per_s)?;
        }
        if a.kind == ArrivalKind::Bursts {
            for (key, v) in [
                ("arrivals.burst-rate-per-s", a.burst_rate_per_s),
                ("arrivals.burst-every-s", a.burst_every_s),
                ("arrivals.burst-length-s", a.burst_length_s),
            ] {
                match v {
                    Some(v) => positive(key, v)?,
                    None => bail!("{key}: required for kind = \"bursts\""),
                }
            }
        }
        for (i, r) in self.requests.iter().enumerate() {
            positive(&format!("requests[{i}].weight"), r.weight)?;
            if r.method.is_empty() {
                bail!("requests[{i}].method: must not be empty");
            }
        }
        if self.providers.is_empty() {
            bail!("providers: at least one [[providers]] group is needed");
        }
        let mut total = 0u64;
        let mut names = std::collections::BTreeSet::new();
        for (i, p) in self.providers.iter().enumerate() {
            let key = |k: &str| format!("providers[{i}].{k}");
            if p.name.is_empty()
                || !p
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                bail!(
                    "{}: letters, digits, - and _ only, got {:?}",
                    key("name"),
                    p.name
                );
            }
            if !names.insert(p.name.clone()) {
                bail!("{}: group `{}` is defined twice", key("name"), p.name);
            }
            if p.count == 0 {
                bail!("{}: must be at least 1", key("count"));
            }
            total += u64::from(p.count);
            if p.capacity == 0 {
                bail!("{}: must be at least 1", key("capacity"));
            }
            non_negative(&key("warmup-s"), p.warmup_s)?;
            share(&key("error-rate"), p.error_rate)?;
            match p.latency {
                Latency::Constant { ms } => non_negative(&key("latency.ms"), ms)?,
                Latency::Uniform { min_ms, max_ms } => {
                    non_negative(&key("latency.min-ms"), min_ms)?;
                    if max_ms < min_ms || !max_ms.is_finite() {
                        bail!(
                            "{}: must be at least min-ms ({min_ms})",
                            key("latency.max-ms")
                        );
                    }
                }
                Latency::Lognormal { p50_ms, p99_ms } => {
                    positive(&key("latency.p50-ms"), p50_ms)?;
                    if p99_ms < p50_ms || !p99_ms.is_finite() {
                        bail!(
                            "{}: must be at least p50-ms ({p50_ms})",
                            key("latency.p99-ms")
                        );
                    }
                }
            }
        }
        if total > MAX_PROVIDERS {
            bail!("providers: {total} providers, at most {MAX_PROVIDERS}");
        }
        for (i, f) in self.faults.iter().enumerate() {
            self.check_fault(i, f)?;
        }
        Ok(())
    }

    fn check_fault(&self, i: usize, f: &Fault) -> anyhow::Result<()> {
        use anyhow::bail;
        let key = |k: &str| format!("faults[{i}].{k}");
        non_negative(&key("at-s"), f.at_s)?;
        if let Some(d) = f.for_s {
            positive(&key("for-s"), d)?;
        }
        if f.kind == FaultKind::DiscoveryOutage {
            return Ok(());
        }
        let Some(name) = &f.group else {
            bail!(
                "{}: required for kind = \"{}\"",
                key("group"),
                f.kind.name()
            );
        };
        let Some(group) = self.providers.iter().find(|p| &p.name == name) else {
            bail!("{}: no provider group `{name}`", key("group"));
        };
        for m in f.members.iter().flatten() {
            if *m >= group.count {
                bail!(
                    "{}: member {m} of `{name}`, which has {}",
                    key("members"),
                    group.count
                );
            }
        }
        let need = |k: &str, present: bool| {
            if present {
                Ok(())
            } else {
                Err(anyhow::anyhow!(
                    "{}: required for kind = \"{}\"",
                    key(k),
                    f.kind.name()
                ))
            }
        };
        match f.kind {
            FaultKind::HalfDead => {
                need("share", f.share.is_some())?;
                share(&key("share"), f.share.unwrap_or(0.0))?;
            }
            FaultKind::Slow => {
                need("factor", f.factor.is_some())?;
                positive(&key("factor"), f.factor.unwrap_or(0.0))?;
            }
            FaultKind::Overload => {
                need("capacity", f.capacity.is_some())?;
                if f.capacity == Some(0) {
                    bail!("{}: must be at least 1", key("capacity"));
                }
            }
            FaultKind::RollingRestart => {
                need("every-s", f.every_s.is_some())?;
                need("down-s", f.down_s.is_some())?;
                positive(&key("every-s"), f.every_s.unwrap_or(0.0))?;
                positive(&key("down-s"), f.down_s.unwrap_or(0.0))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Number of providers.
    pub fn provider_count(&self) -> usize {
        self.providers.iter().map(|p| p.count as usize).sum()
    }
}

fn positive(key: &str, v: f64) -> anyhow::Result<()> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        anyhow::bail!("{key}: must be a positive number, got {v}")
    }
}

fn non_negative(key: &str, v: f64) -> anyhow::Result<()> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        anyhow::bail!("{key}: must be zero or more, got {v}")
    }
}

fn share(key: &str, v: f64) -> anyhow::Result<()> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        anyhow::bail!("{key}: must be between 0 and 1, got {v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
duration-s = 10
[arrivals]
kind = "poisson"
rate-per-s = 100
[[providers]]
name = "p"
count = 3
latency = { kind = "lognormal", p50-ms = 2, p99-ms = 20 }
"#;

    fn error(extra: &str) -> String {
        Scenario::parse(&format!("{BASE}{extra}"))
            .expect_err("must be refused")
            .to_string()
    }

    #[test]
    fn a_small_scenario_parses_with_defaults() {
        let s = Scenario::parse(BASE).unwrap();
        assert_eq!((s.seed, s.service.as_str(), s.sample_ms), (1, "echo", 1000));
        assert_eq!(s.provider_count(), 3);
        assert_eq!(s.requests.len(), 1);
        assert_eq!(s.providers[0].capacity, 100);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(
            error("[[faults]]\nat-s = 1\nkind = \"kill\"\ngroup = \"q\"\n")
                .contains("faults[0].group: no provider group `q`")
        );
        assert!(
            error("[[faults]]\nat-s = 1\nkind = \"half-dead\"\ngroup = \"p\"\n")
                .contains("faults[0].share: required")
        );
        assert!(
            error("[[faults]]\nat-s = 1\nkind = \"kill\"\ngroup = \"p\"\nmembers = [3]\n")
                .contains("faults[0].members")
        );
        assert!(
            error("[[providers]]\nname = \"p\"\nlatency = { kind = \"constant\", ms = 1 }\n")
                .contains("providers[1].name: group `p` is defined twice")
        );
        assert!(error("[[providers]]\nname = \"q\"\ncapacity = 0\nlatency = { kind = \"constant\", ms = 1 }\n")
            .contains("providers[1].capacity"));
        assert!(error("[[requests]]\nweight = -1\n").contains("requests[0].weight"));
        let unknown = error("[[providers]]\nname = \"q\"\nlatncy = 1\n");
        assert!(unknown.contains("latncy"), "{unknown}");
        let closed = Scenario::parse(&BASE.replace("\"poisson\"", "\"closed\"")).unwrap_err();
        assert!(
            closed.to_string().contains("arrivals.workers: required"),
            "{closed}"
        );
        let bursts = Scenario::parse(&BASE.replace("\"poisson\"", "\"bursts\"")).unwrap_err();
        assert!(
            bursts.to_string().contains("arrivals.burst-rate-per-s"),
            "{bursts}"
        );
    }

    #[test]
    fn too_many_providers_are_refused() {
        let text = BASE.replace("count = 3", "count = 100001");
        assert!(Scenario::parse(&text)
            .unwrap_err()
            .to_string()
            .contains("at most 100000"));
    }
}
