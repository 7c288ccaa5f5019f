//! `axle bench hostile`: the standard load (32 callers, 64-byte raw echo, three in-process
//! providers) with a hostile selector in the `echo` path, each behaviour as a ratio to the
//! same run with a well-behaved selector, measured in the same process. Beside it, a few
//! callers on a service whose path the plugin is not in, to show that their p99 stays.
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

/// Runs every case (or the baseline and those whose name contains `only`) for `duration`.
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
    let mut rows: Vec<Row> = Vec::new();
    for (case, behaviour, every, slow_us) in CASES {
        let wanted = behaviour.is_empty() || only.is_none_or(|o| case.contains(o));
        if !wanted {
            continue;
        }
        let client = client(host, &component, behaviour, *every, *slow_us, &endpoints)?;
        let (mut row, first_rate) = load(&client, case, duration).await;
        let base = rows.first().map_or(row.req_per_s, |b| b.req_per_s).max(1.0);
        row.ratio = row.req_per_s / base;
        row.first_second_ratio = first_rate / base;
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

/// The case's row, and its req/s in the first second (or the whole run, if shorter).
async fn load(client: &Client, case: &str, duration: Duration) -> (Row, f64) {
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
    let first_window = duration.min(Duration::from_secs(1));
    tokio::time::sleep(first_window).await;
    let first_second = calls.load(Relaxed) as f64;
    tokio::time::sleep(duration.saturating_sub(first_window)).await;
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (h, o) = (hist.snapshot(), other_hist.snapshot());
    let row = Row {
        case: case.to_string(),
        req_per_s: calls.load(Relaxed) as f64 / elapsed,
        ratio: 1.0,
        first_second_ratio: 1.0,
        p99_us: h.p99_ns as f64 / 1000.0,
        errors: errors.load(Relaxed),
        other_p99_us: o.p99_ns as f64 / 1000.0,
        safe_defaults: 0,
        quarantine_trips: 0,
    };
    (row, first_second / first_window.as_secs_f64())
}
