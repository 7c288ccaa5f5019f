//! `axle bench hostile`: the standard load (32 callers, 64-byte raw echo, three in-process
//! providers) with a hostile selector in the `echo` path, each behaviour as a ratio to the
//! same load with a well-behaved selector, the two measured in alternating slices of the
//! same run. Beside it, a few callers on a service whose path the plugin is not in, to
//! show that their p99 stays.
//!
//! Targets (`docs/sandbox.md`): at least 50% of normal throughput with a plugin that faults
//! on every call, within 1 s of the first fault (the `first_second_ratio` column); at least
//! 90% with one that faults on 1% of calls; the other path's p99 unchanged.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client, ClientConfig};
use axle::core::latency::Latency;
use axle::manifest::{ComponentSource, EndpointSpec, Manifest, PluginKind, PluginSpec};
use axle::plugin::PluginHost;
use axle::server::{Response, ServerBuilder};
use bytes::Bytes;

include!(concat!(env!("OUT_DIR"), "/hostile.rs"));

/// Callers on the hostile path.
pub const CALLERS: usize = 32;
/// Callers on the other path.
pub const OTHER_CALLERS: usize = 4;

/// (case, behaviour, every, slow-call-us with quarantine-slow, 0: none): the baseline
/// first, then the hostile fixture behaving, to show that a ratio measures the
/// behaviour and not the fixture.
pub const CASES: &[(&str, &str, i64, u64)] = &[
    ("baseline: round-robin", "", 0, 0),
    ("the fixture, behaving", "none", 1, 0),
    ("panics on every call", "panic", 1, 0),
    ("panics on 1% of calls", "panic", 100, 0),
    ("aborts on 1% of calls", "abort", 100, 0),
    ("spins on every call", "spin", 1, 0),
    ("sleeps on every call", "sleep", 1, 0),
    ("grows 4 MiB on every call", "grow", 1, 0),
    ("  with a 500 µs slow budget", "grow", 1, 500),
    ("prints on every call", "print", 1, 0),
];

/// One case.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub case: String,
    pub req_per_s: f64,
    /// To the baseline's req/s.
    pub ratio: f64,
    /// Req/s in the first second, to the baseline's.
    pub first_second_ratio: f64,
    pub p99_us: f64,
    pub errors: u64,
    /// p99 of the callers on the path the plugin is not in.
    pub other_p99_us: f64,
    /// Calls answered by the safe default (faults, skipped in quarantine, replacing).
    pub safe_defaults: u64,
    pub quarantine_trips: u64,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub seconds_per_case: f64,
    pub callers: usize,
    pub rows: Vec<Row>,
}

/// The baseline's and a case's load alternate in slices this long after the case's first
/// second, so that a machine growing busier or quieter during the run moves both alike
/// (on a shared two-core machine, a case measured after the baseline drifted ±10%).
const SLICE: Duration = Duration::from_millis(500);

/// Runs every case (or the baseline and those whose name contains `only`) for `duration`:
/// the case's first second (or `duration`, if shorter) without a break, then in
/// [`SLICE`]s alternating with the baseline; its ratio is to the baseline's throughput
/// over the same stretch of the run, as long in total.
pub async fn run(
    host: &PluginHost,
    duration: Duration,
    only: Option<&str>,
) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir()?;
    let component = dir.path().join("hostile.wasm");
    std::fs::write(&component, HOSTILE_SELECTOR)?;
    let mut servers = Vec::new();
    let mut endpoints = Vec::new();
    for _ in 0..3 {
        let s = echo_both(ServerBuilder::new()).bind("127.0.0.1:0").await?;
        endpoints.push(EndpointSpec::new(s.local_addr().to_string()));
        servers.push(s);
    }
    let first_window = duration.min(Duration::from_secs(1));
    let base_client = client(host, &component, "", 0, 0, &endpoints)?;
    let mut base = load(&base_client, duration).await;
    let base_rate = base.rate();
    let mut rows = vec![base.row(CASES[0].0, base_rate, base_rate)];
    for (case, behaviour, every, slow_us) in &CASES[1..] {
        if only.is_some_and(|o| !case.contains(o)) {
            continue;
        }
        let client = client(host, &component, behaviour, *every, *slow_us, &endpoints)?;
        base = load(&base_client, first_window).await;
        let mut measured = load(&client, first_window).await;
        let first_rate = measured.rate();
        let mut left = duration.saturating_sub(first_window);
        while !left.is_zero() {
            let slice = left.min(SLICE);
            base.add(load(&base_client, slice).await);
            measured.add(load(&client, slice).await);
            left -= slice;
        }
        let mut row = measured.row(case, base.rate(), first_rate);
        if let Some(p) = client.plugins().iter().find(|p| p.name == "hostile") {
            let s = &p.stats;
            row.safe_defaults = s.faults() + s.skipped + s.replacing;
            row.quarantine_trips = s.trips;
        }
        rows.push(row);
    }
    for s in servers {
        s.shutdown(Duration::from_millis(100)).await;
    }
    Ok(Report {
        seconds_per_case: duration.as_secs_f64(),
        callers: CALLERS,
        rows,
    })
}

/// `echo` and `other`, both answering their input.
fn echo_both(builder: ServerBuilder) -> ServerBuilder {
    let echo: axle::server::Handler = Arc::new(|req| {
        Box::pin(async move {
            Ok(Response {
                payload: req.payload,
                content_type: req.content_type,
            })
        })
    });
    builder
        .any_method("echo", echo.clone())
        .any_method("other", echo)
}

/// A client whose `echo` selector is the hostile plugin doing `behaviour` (none: the
/// baseline, round-robin) and whose `other` selector is round-robin.
fn client(
    host: &PluginHost,
    component: &std::path::Path,
    behaviour: &str,
    every: i64,
    slow_us: u64,
    endpoints: &[EndpointSpec],
) -> anyhow::Result<Client> {
    let mut m = Manifest::embedded()?;
    m.endpoints.clear();
    if !behaviour.is_empty() {
        let mut config = toml::Table::new();
        config.insert("behaviour".into(), toml::Value::String(behaviour.into()));
        config.insert("every".into(), toml::Value::Integer(every));
        m.plugins.insert(
            "hostile".into(),
            PluginSpec {
                slow_call_us: slow_us,
                quarantine_slow: slow_us > 0,
                config,
                ..PluginSpec::new(
                    "hostile",
                    PluginKind::Selector,
                    ComponentSource::File(component.to_path_buf()),
                )
            },
        );
        m.services.entry("echo".into()).or_default().selector = Some("hostile".into());
    }
    Client::new(
        host,
        ClientConfig::new(m)
            .endpoints("echo", endpoints.to_vec())
            .endpoints("other", endpoints.to_vec()),
    )
}

/// What one or more stretches of load with one client counted.
struct Measured {
    calls: u64,
    errors: u64,
    seconds: f64,
    hist: Arc<Latency>,
    other_hist: Arc<Latency>,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.seconds.max(1e-9)
    }

    fn add(&mut self, more: Measured) {
        self.calls += more.calls;
        self.errors += more.errors;
        self.seconds += more.seconds;
        self.hist.merge(&more.hist);
        self.other_hist.merge(&more.other_hist);
    }

    /// The row, its rates as ratios to `base_rate` (the baseline's over the same stretch).
    fn row(&self, case: &str, base_rate: f64, first_rate: f64) -> Row {
        let base_rate = base_rate.max(1.0);
        let (h, o) = (self.hist.snapshot(), self.other_hist.snapshot());
        Row {
            case: case.to_string(),
            req_per_s: self.rate(),
            ratio: self.rate() / base_rate,
            first_second_ratio: first_rate / base_rate,
            p99_us: h.p99_ns as f64 / 1000.0,
            errors: self.errors,
            other_p99_us: o.p99_ns as f64 / 1000.0,
            safe_defaults: 0,
            quarantine_trips: 0,
        }
    }
}

/// [`CALLERS`] on `echo` and [`OTHER_CALLERS`] on `other` through `client` for `duration`.
async fn load(client: &Client, duration: Duration) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Latency::default());
    let other_hist = Arc::new(Latency::default());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..CALLERS + OTHER_CALLERS {
        let (client, stop, calls, errors) =
            (client.clone(), stop.clone(), calls.clone(), errors.clone());
        let on_path = i < CALLERS;
        let hist = if on_path {
            hist.clone()
        } else {
            other_hist.clone()
        };
        tasks.push(tokio::spawn(async move {
            let service = if on_path { "echo" } else { "other" };
            let local = Latency::default();
            while !stop.load(Relaxed) {
                let t = Instant::now();
                let body = Bytes::from_static(&[7; 64]);
                let ok = client
                    .call_raw(service, "x", body, &CallOptions::default())
                    .await
                    .is_ok();
                local.record(t.elapsed().as_nanos() as u64);
                if on_path {
                    calls.fetch_add(1, Relaxed);
                    if !ok {
                        errors.fetch_add(1, Relaxed);
                    }
                }
            }
            hist.merge(&local);
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    Measured {
        calls: calls.load(Relaxed),
        errors: errors.load(Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        hist,
        other_hist,
    }
}
