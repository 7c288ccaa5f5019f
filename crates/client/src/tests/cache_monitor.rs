//! Result caching and monitoring against scripted endpoints: a cached method sends a
//! request once per distinct body; with `monitor = false` nothing is counted while calls
//! still succeed and breakers still open; every retry, failover and hedge is logged.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::{host, Fake, Mode};
use crate::{CallOptions, Client, ClientConfig};
use axle_governance::TierSettings;
use axle_manifest::{EndpointSpec, Manifest};
use axle_plugin_host::PluginHost;

/// A client of `svc` at `endpoints`, `global` at the global tier and `method` as the
/// method tier of `svc/m` (declared, so it has its own policy).
fn client(host: &PluginHost, endpoints: Vec<EndpointSpec>, global: &str, method: &str) -> Client {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let tier = |text: &str| -> TierSettings {
        let layer: TierSettings = toml::from_str(text).unwrap();
        layer.validate().unwrap();
        layer
    };
    m.governance = tier(&format!(
        "heartbeat-interval-ms = 100\nheartbeat-timeout-ms = 500\nhealth-interval-ms = 100\n{global}"
    ));
    m.services.entry("svc".into()).or_default();
    m.method_governance
        .insert(("svc".into(), "m".into()), tier(method));
    Client::new(host, ClientConfig::new(m).endpoints("svc", endpoints)).unwrap()
}

/// The counts of `svc/m`'s own policy.
fn counts(client: &Client) -> crate::CallCounts {
    let svc = client.services().remove(0);
    let policy = svc.policies.into_iter().find(|p| p.method == "m").unwrap();
    policy.counts
}

async fn send(client: &Client, body: &'static [u8]) -> Result<crate::Reply, crate::CallError> {
    client
        .call_raw(
            "svc",
            "m",
            Bytes::from_static(body),
            &CallOptions::default(),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_method_sends_each_distinct_request_once() {
    let (host, _cache) = host();
    let a = Fake::start(Mode::Echo).await;
    let c = client(
        &host,
        vec![a.spec()],
        "",
        "idempotent = true\ncache-ttl-ms = 60000\ncache-max-entries = 10",
    );
    for _ in 0..3 {
        assert_eq!(&send(&c, b"one").await.unwrap().payload[..], b"one");
    }
    assert_eq!(a.requests.load(Relaxed), 1, "answered from the cache twice");
    assert_eq!(&send(&c, b"two").await.unwrap().payload[..], b"two");
    assert_eq!(
        a.requests.load(Relaxed),
        2,
        "another body is another request"
    );
    let n = counts(&c);
    assert_eq!((n.cache_hits, n.cache_misses), (2, 2));
    assert_eq!(n.calls, 2, "a hit is not a call: nothing was sent");
    // A failure is never kept: the next call goes out again.
    a.set(Mode::Failing);
    assert!(send(&c, b"three").await.is_err());
    a.set(Mode::Echo);
    assert_eq!(&send(&c, b"three").await.unwrap().payload[..], b"three");
    assert_eq!(a.requests.load(Relaxed), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cache_every_call_is_sent() {
    let (host, _cache) = host();
    let a = Fake::start(Mode::Echo).await;
    let c = client(&host, vec![a.spec()], "", "idempotent = true");
    for _ in 0..3 {
        send(&c, b"one").await.unwrap();
    }
    assert_eq!(a.requests.load(Relaxed), 3);
    let n = counts(&c);
    assert_eq!((n.cache_hits, n.cache_misses, n.calls), (0, 0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_off_counts_nothing_and_breakers_still_open() {
    let (host, _cache) = host();
    let (a, b) = (
        Fake::start(Mode::Echo).await,
        Fake::start(Mode::Overloaded).await,
    );
    let c = client(
        &host,
        vec![a.spec(), b.spec()],
        "monitor = false",
        "retries = 0\nbreaker-consecutive-failures = 2\nbreak-ms = 60000\n\
         retry-budget-min-per-s = 100000",
    );
    // Calls succeed (some after a failover from the overloaded endpoint).
    for _ in 0..4 {
        send(&c, b"x").await.unwrap();
    }
    assert!(a.requests.load(Relaxed) >= 4);
    a.set(Mode::Failing);
    b.set(Mode::Failing);
    let open = || {
        let svc = c.services().remove(0);
        let m = svc.policies.iter().find(|p| p.method == "m").unwrap();
        m.breaker == "open"
    };
    for _ in 0..10 {
        if open() {
            break;
        }
        assert!(send(&c, b"x").await.is_err());
    }
    assert!(open(), "two failures in a row open the breaker");
    assert!(matches!(
        send(&c, b"x").await,
        Err(crate::CallError::BreakerOpen { .. })
    ));
    let n = counts(&c);
    assert_eq!((n.calls, n.ok, n.errors.len()), (0, 0, 0));
    assert_eq!((n.retries, n.failovers, n.hedges), (0, 0, 0));
    assert_eq!(n.latency_histogram.count, 0);
}

/// What the process's `tracing` subscriber wrote from one thread (the test's), shared
/// with the test.
#[derive(Clone)]
struct Log {
    thread: std::thread::ThreadId,
    text: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if std::thread::current().id() == self.thread {
            self.text.lock().unwrap().extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// One thread: every event of the call is on it. The subscriber is the process's global
// one, not a thread's default: `tracing` caches per call site whether anyone listens,
// and with a thread's default that cache raced the other tests' threads hitting the same
// call sites (a "retrying" event went unrecorded in about one run in two). Other tests'
// events reach it too, from their own threads, and are left out.
#[tokio::test(flavor = "current_thread")]
async fn every_retry_failover_and_hedge_is_logged_with_its_reason() {
    let log = Log {
        thread: std::thread::current().id(),
        text: Default::default(),
    };
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber)
        .expect("no other test in this binary sets the global subscriber");
    let (host, _cache) = host();
    let (failing, other, overloaded) = (
        Fake::start(Mode::Failing).await,
        Fake::start(Mode::Failing).await,
        Fake::start(Mode::Overloaded).await,
    );
    // A retry goes to an endpoint not tried yet: two that fail.
    let retried = client(
        &host,
        vec![failing.spec(), other.spec()],
        "",
        "idempotent = true\nretries = 1\nbreaker = false\nretry-budget-min-per-s = 1000",
    );
    assert!(send(&retried, b"x").await.is_err());
    let refused = client(
        &host,
        vec![overloaded.spec(), failing.spec()],
        "",
        "retries = 0\nmax-failovers = 1\nbreaker = false\nretry-budget-min-per-s = 1000",
    );
    // The overloaded endpoint is picked first at some point: call until a failover shows.
    for _ in 0..20 {
        if counts(&refused).failovers > 0 {
            break;
        }
        let _ = send(&refused, b"x").await;
    }
    assert!(counts(&refused).failovers > 0);
    // A hedge: the silent endpoint picked first, the backup goes to the other.
    let silent = Fake::start(Mode::Silent).await;
    let echo = Fake::start(Mode::Echo).await;
    let hedged = client(
        &host,
        vec![silent.spec(), echo.spec()],
        "",
        "idempotent = true\nhedge-delay-ms = 20\ntimeout-ms = 5000\nretry-budget-min-per-s = 1000",
    );
    for _ in 0..20 {
        if counts(&hedged).hedges > 0 {
            break;
        }
        send(&hedged, b"x").await.unwrap();
    }
    assert!(counts(&hedged).hedges > 0);
    let text = String::from_utf8(log.text.lock().unwrap().clone()).unwrap();
    let line = |what: &str| {
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} line in:\n{text}"))
            .to_string()
    };
    let retry = line("retrying");
    for field in [
        "service=svc",
        "method=\"m\"",
        "attempt=2",
        "reason=",
        "internal",
    ] {
        assert!(retry.contains(field), "{field} in {retry}");
    }
    let failover = line("failing over");
    for field in ["service=svc", "attempt=2", "overloaded"] {
        assert!(failover.contains(field), "{field} in {failover}");
    }
    let hedge = line("hedging");
    for field in ["service=svc", "attempt=2", "hedge-delay-ms"] {
        assert!(hedge.contains(field), "{field} in {hedge}");
    }
}
