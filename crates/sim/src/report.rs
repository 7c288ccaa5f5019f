//! What a run measured, and its JSON form: totals (success rate, p50/p99 through the
//! kernel's own latency histogram, retries, failovers, budget refusals, breaker
//! rejections, ejections and re-admissions), a time series per `sample-ms` (requests,
//! success rate, p50/p99, traffic share per provider group and per named or top
//! endpoint), the health events and the faults applied. Nothing in it depends on the
//! wall clock, so the same seed gives the same JSON byte for byte.

use std::collections::BTreeMap;

use axle_client::health::HealthChange;
use axle_client::{CallError, Reply};
use axle_core::latency::Latency;
use axle_wire::ErrorClass;
use serde::Serialize;

use crate::caller::{counts, Kernel};
use crate::faults::Action;
use crate::provider::Provider;
use crate::scenario::Scenario;

/// At most this many time buckets (a longer run gets wider ones).
const MAX_BUCKETS: u64 = 1000;
/// At most this many health events listed (all are counted).
const MAX_EVENTS: usize = 2000;
/// Per-endpoint series are kept while endpoints × buckets stays below this.
const MAX_CELLS: usize = 20_000_000;
/// Endpoints with the most traffic shown in the series besides the watched ones.
const TOP: usize = 5;

struct Bucket {
    requests: u64,
    ok: u64,
    errors: u64,
    latency: Latency,
    sent: u64,
    sent_by_group: Vec<u64>,
}

/// Collects a run's measurements.
pub struct Recorder {
    sample_ns: u64,
    groups: Vec<String>,
    names: Vec<String>,
    group_of: Vec<usize>,
    buckets: Vec<Bucket>,
    /// Attempts per endpoint per bucket (flat: bucket × endpoints + endpoint).
    per_endpoint: Option<Vec<u32>>,
    sent_total: Vec<u64>,
    /// Attempts each provider's limiter rejected.
    pub rate_limited: Vec<u64>,
    requests: u64,
    ok: u64,
    errors: BTreeMap<&'static str, u64>,
    latency: Latency,
    pub retries: u64,
    pub failovers: u64,
    pub budget_refused: u64,
    pub breaker_rejected: u64,
    pub tables: u64,
    health: BTreeMap<&'static str, u64>,
    events: Vec<EventOut>,
    faults: Vec<EventOut>,
    final_states: Vec<&'static str>,
    watch: Vec<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EventOut {
    pub t_s: f64,
    pub endpoint: String,
    pub what: String,
}

/// The report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub seed: u64,
    pub manifest: String,
    pub providers: usize,
    pub duration_s: f64,
    pub sample_ms: u64,
    pub totals: Totals,
    pub series: Vec<Point>,
    pub endpoints: Vec<EndpointOut>,
    pub health_events: Vec<EventOut>,
    pub faults: Vec<EventOut>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Totals {
    pub requests: u64,
    pub ok: u64,
    pub errors: BTreeMap<&'static str, u64>,
    pub success_rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub retries: u64,
    pub failovers: u64,
    pub budget_refused: u64,
    pub breaker_rejected: u64,
    /// Health changes by kind: disabled, ejected, unreachable, readmitted.
    pub health: BTreeMap<&'static str, u64>,
    pub tables_published: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Point {
    /// The bucket's end (virtual s).
    pub t_s: f64,
    pub requests: u64,
    /// Calls that ended in the bucket, answered or failed.
    pub ok: u64,
    pub errors: u64,
    pub success_rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Share of attempts per provider group.
    pub groups: BTreeMap<String, f64>,
    /// Share of attempts of the watched and the busiest endpoints.
    pub endpoints: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EndpointOut {
    pub name: String,
    pub group: String,
    pub attempts: u64,
    pub share: f64,
    /// Attempts its limiter rejected (`rate_limited`; 0 without a limiter).
    pub rate_limited: u64,
    /// Its standing at the end, as the caller saw it.
    pub state: &'static str,
}

fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        ((a as f64 / b as f64) * 1e6).round() / 1e6
    }
}

/// The label of a failed call's error.
fn label(e: &CallError) -> &'static str {
    use axle_transport::TransportError as T;
    match e {
        CallError::Transport(T::Timeout) => "timeout",
        CallError::Transport(T::Connect { .. }) => "refused",
        CallError::Transport(T::Reset { .. }) => "reset",
        CallError::Transport(_) => "transport",
        CallError::Remote {
            class: ErrorClass::RateLimited,
            ..
        } => "rate_limited",
        CallError::Remote { .. } => "internal",
        CallError::BreakerOpen { .. } => "breaker_open",
        CallError::NoEndpoint { .. } => "no_endpoint",
        _ => "other",
    }
}

impl Recorder {
    pub fn new(s: &Scenario, providers: &[Provider]) -> Recorder {
        let duration_ns = (s.duration_s * 1e9) as u64;
        let mut sample_ns = s.sample_ms * 1_000_000;
        if duration_ns / sample_ns >= MAX_BUCKETS {
            sample_ns = duration_ns.div_ceil(MAX_BUCKETS - 1);
        }
        let n = (duration_ns / sample_ns + 1) as usize;
        let groups: Vec<String> = s.providers.iter().map(|g| g.name.clone()).collect();
        let buckets = (0..n)
            .map(|_| Bucket {
                requests: 0,
                ok: 0,
                errors: 0,
                latency: Latency::default(),
                sent: 0,
                sent_by_group: vec![0; groups.len()],
            })
            .collect();
        let cells = n * providers.len();
        Recorder {
            sample_ns,
            names: providers.iter().map(|p| p.name.clone()).collect(),
            group_of: providers.iter().map(|p| p.group).collect(),
            groups,
            buckets,
            per_endpoint: (cells <= MAX_CELLS).then(|| vec![0; cells]),
            sent_total: vec![0; providers.len()],
            rate_limited: vec![0; providers.len()],
            requests: 0,
            ok: 0,
            errors: BTreeMap::new(),
            latency: Latency::default(),
            retries: 0,
            failovers: 0,
            budget_refused: 0,
            breaker_rejected: 0,
            tables: 0,
            health: BTreeMap::new(),
            events: Vec::new(),
            faults: Vec::new(),
            final_states: Vec::new(),
            watch: s.watch.clone(),
        }
    }

    fn bucket(&self, t: u64) -> usize {
        ((t / self.sample_ns) as usize).min(self.buckets.len() - 1)
    }

    pub fn request(&mut self, t: u64) {
        self.requests += 1;
        let b = self.bucket(t);
        self.buckets[b].requests += 1;
    }

    /// An attempt went to provider `p`.
    pub fn sent(&mut self, t: u64, p: usize) {
        let b = self.bucket(t);
        let n = self.names.len();
        let bucket = &mut self.buckets[b];
        bucket.sent += 1;
        bucket.sent_by_group[self.group_of[p]] += 1;
        self.sent_total[p] += 1;
        if let Some(cells) = &mut self.per_endpoint {
            cells[b * n + p] += 1;
        }
    }

    /// A call ended after `took` ns (counted in the bucket it ended in).
    pub fn call_ended(&mut self, t: u64, took: u64, result: &Result<Reply, CallError>) {
        let b = self.bucket(t);
        let bucket = &mut self.buckets[b];
        match result {
            Ok(_) => {
                self.ok += 1;
                bucket.ok += 1;
                bucket.latency.record(took);
                self.latency.record(took);
            }
            Err(e) => {
                bucket.errors += 1;
                *self.errors.entry(label(e)).or_default() += 1;
            }
        }
    }

    pub fn health(&mut self, t: u64, changes: &[(u32, HealthChange)], providers: &[Provider]) {
        for (id, change) in changes {
            let what = counts(*change);
            *self.health.entry(what).or_default() += 1;
            if self.events.len() < MAX_EVENTS {
                self.events.push(EventOut {
                    t_s: ms(t) / 1e3,
                    endpoint: providers[*id as usize].name.clone(),
                    what: what.into(),
                });
            }
        }
    }

    pub fn fault(&mut self, t: u64, action: &Action, providers: &[Provider]) {
        let (who, what) = match action {
            Action::Kill(p) => (Some(*p), "kill".to_string()),
            Action::Start(p) => (Some(*p), "start".into()),
            Action::Hang(p, share) => (Some(*p), format!("hang share {share}")),
            Action::Slow(p, f) => (Some(*p), format!("slow x{f}")),
            Action::Partition(p, on) => (
                Some(*p),
                if *on { "partitioned" } else { "reachable" }.into(),
            ),
            Action::Slots(p, s) => (
                Some(*p),
                format!("capacity {}", s.map_or("back".into(), |s| s.to_string())),
            ),
            Action::DiscoveryOutage(on) => (
                None,
                if *on {
                    "discovery outage"
                } else {
                    "discovery back"
                }
                .into(),
            ),
        };
        if self.faults.len() < MAX_EVENTS {
            self.faults.push(EventOut {
                t_s: ms(t) / 1e3,
                endpoint: who.map_or(String::new(), |p| providers[p].name.clone()),
                what,
            });
        }
    }

    pub fn listing(&mut self, t: u64, p: u32, listed: bool) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(EventOut {
                t_s: ms(t) / 1e3,
                endpoint: self.names[p as usize].clone(),
                what: if listed { "listed" } else { "delisted" }.into(),
            });
        }
    }

    /// Records each endpoint's final standing.
    pub fn finish(&mut self, kernel: &Kernel, _providers: &[Provider]) {
        self.final_states = kernel
            .endpoints
            .iter()
            .map(|e| {
                if e.listed {
                    e.health.status().shown()
                } else {
                    "delisted"
                }
            })
            .collect();
    }

    /// The endpoints shown one by one: the watched ones, then the busiest (all of them
    /// for a small scenario).
    fn shown(&self) -> Vec<usize> {
        let mut shown: Vec<usize> = self
            .watch
            .iter()
            .filter_map(|w| self.names.iter().position(|n| n == w))
            .collect();
        if self.names.len() <= 20 {
            shown.extend(0..self.names.len());
        } else {
            let mut by_traffic: Vec<usize> = (0..self.names.len()).collect();
            by_traffic.sort_by_key(|p| (std::cmp::Reverse(self.sent_total[*p]), *p));
            shown.extend(by_traffic.into_iter().take(TOP));
        }
        let mut seen = std::collections::BTreeSet::new();
        shown.retain(|p| seen.insert(*p));
        shown
    }

    pub fn report(&self, s: &Scenario, manifest: &str) -> Report {
        let snap = self.latency.snapshot();
        let shown = self.shown();
        let n = self.names.len();
        let series = self
            .buckets
            .iter()
            .enumerate()
            .map(|(b, bucket)| {
                let l = bucket.latency.snapshot();
                let groups = self
                    .groups
                    .iter()
                    .zip(&bucket.sent_by_group)
                    .map(|(g, c)| (g.clone(), ratio(*c, bucket.sent)))
                    .collect();
                let endpoints = match &self.per_endpoint {
                    Some(cells) => shown
                        .iter()
                        .map(|p| {
                            (
                                self.names[*p].clone(),
                                ratio(u64::from(cells[b * n + p]), bucket.sent),
                            )
                        })
                        .collect(),
                    None => BTreeMap::new(),
                };
                Point {
                    t_s: ms((b as u64 + 1) * self.sample_ns) / 1e3,
                    requests: bucket.requests,
                    ok: bucket.ok,
                    errors: bucket.errors,
                    success_rate: ratio(bucket.ok, bucket.ok + bucket.errors),
                    p50_ms: ms(l.p50_ns),
                    p99_ms: ms(l.p99_ns),
                    groups,
                    endpoints,
                }
            })
            .collect();
        let all_sent: u64 = self.sent_total.iter().sum();
        let mut endpoints: Vec<usize> = shown;
        if n <= 100 {
            endpoints = (0..n).collect();
        }
        let endpoints = endpoints
            .into_iter()
            .map(|p| EndpointOut {
                name: self.names[p].clone(),
                group: self.groups[self.group_of[p]].clone(),
                attempts: self.sent_total[p],
                share: ratio(self.sent_total[p], all_sent),
                rate_limited: self.rate_limited[p],
                state: self.final_states.get(p).copied().unwrap_or("unknown"),
            })
            .collect();
        let failed: u64 = self.errors.values().sum();
        Report {
            seed: s.seed,
            manifest: manifest.to_string(),
            providers: n,
            duration_s: s.duration_s,
            sample_ms: self.sample_ns / 1_000_000,
            totals: Totals {
                requests: self.requests,
                ok: self.ok,
                errors: self.errors.clone(),
                success_rate: ratio(self.ok, self.ok + failed),
                p50_ms: ms(snap.p50_ns),
                p99_ms: ms(snap.p99_ns),
                max_ms: ms(snap.max_ns),
                retries: self.retries,
                failovers: self.failovers,
                budget_refused: self.budget_refused,
                breaker_rejected: self.breaker_rejected,
                health: self.health.clone(),
                tables_published: self.tables,
            },
            series,
            endpoints,
            health_events: self.events.clone(),
            faults: self.faults.clone(),
        }
    }
}
