//! `cluster-rate` with real `axle serve` providers registered in a real etcd: each
//! provider takes rate / N of a global rate, N being the providers discovery lists, so
//! the cluster as a whole admits about the global rate — and when a provider leaves, the
//! others take its share. Skipped, with a message, only where etcd is not installed.

use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client};
use axle::manifest::EndpointSpec;
use axle::plugin::PluginHost;
use axle_host_tests::etcd::{wait_until, Etcd, Provider};
use axle_host_tests::{client_for, rt};

/// The global rate (per second, per key) and burst the providers share.
const RATE: f64 = 150.0;
const BURST: f64 = 15.0;
/// How long each measured phase drives the providers.
const PHASE: Duration = Duration::from_secs(2);

/// The embedded manifest with the limiter slot filled by a `cluster-rate` of [`RATE`].
fn manifest(dir: &std::path::Path) -> std::path::PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base.replacen("limiter = \"token-bucket\"", "limiter = \"shared\"", 1);
    assert_ne!(text, base, "the embedded manifest fills the limiter slot");
    let text = format!(
        "{text}\n[plugins.shared]\nkind = \"limiter\"\ncomponent = \"builtin:cluster-rate\"\n\
         [plugins.shared.config]\nrate = {RATE}\nburst = {BURST}\n"
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A client of `echo` at exactly `addr`.
fn client(rt: &tokio::runtime::Runtime, host: &PluginHost, addr: &str) -> Client {
    let _in = rt.enter();
    client_for(host, "echo", "round-robin", vec![EndpointSpec::new(addr)])
}

/// Drives every client with 3 callers until `until`; the admitted calls per client.
fn drive(rt: &tokio::runtime::Runtime, clients: &[Client], until: Instant) -> Vec<u64> {
    rt.block_on(async {
        let tasks: Vec<_> = clients
            .iter()
            .map(|c| {
                let callers: Vec<_> = (0..3)
                    .map(|_| {
                        let c = c.clone();
                        tokio::spawn(async move {
                            let mut ok = 0u64;
                            let mut calls = 0u64;
                            while Instant::now() < until && calls < 200_000 {
                                calls += 1;
                                let options = CallOptions::timeout(Duration::from_secs(2));
                                let body = bytes::Bytes::from_static(b"hi");
                                match c.call_raw("echo", "say", body, &options).await {
                                    Ok(_) => ok += 1,
                                    // Rejected: the share is spent; try again a little later.
                                    Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                                }
                            }
                            ok
                        })
                    })
                    .collect();
                async move {
                    let mut ok = 0;
                    for t in callers {
                        ok += t.await.expect("caller");
                    }
                    ok
                }
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await);
        }
        out
    })
}

/// Admitted calls over one phase, after a short drain that spends every bucket's burst
/// (so the phase measures the rate, not what was saved up before it).
fn phase(rt: &tokio::runtime::Runtime, clients: &[Client]) -> (Vec<u64>, Duration) {
    drive(rt, clients, Instant::now() + Duration::from_millis(300));
    let start = Instant::now();
    let admitted = drive(rt, clients, start + PHASE);
    (admitted, start.elapsed())
}

#[test]
fn providers_share_a_global_rate_by_the_count_discovery_reports() {
    let Some(etcd) = Etcd::start_or_skip("providers_share_a_global_rate_...") else {
        return;
    };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let path = manifest(dir.path());
    let path = path.to_str().unwrap();
    let rx = etcd.subscribe(&rt, "default", "echo", "default");
    let mut providers: Vec<Provider> = (0..3)
        .map(|_| Provider::start(&etcd.url(), &["--manifest", path, "--lease-ttl-s", "5"]))
        .collect();
    wait_until(Duration::from_secs(10), || rx.borrow().instances.len() == 3)
        .expect("three providers listed");
    let host = PluginHost::new(None).unwrap();
    let clients: Vec<Client> = providers
        .iter()
        .map(|p| client(&rt, &host, &p.addr))
        .collect();

    // Three providers: each admits RATE / 3, the cluster RATE.
    let (admitted, took) = phase(&rt, &clients);
    let total: u64 = admitted.iter().sum();
    let expected = RATE * took.as_secs_f64();
    eprintln!("3 providers: {admitted:?} = {total} in {took:?} (global rate: {expected:.0})");
    // Within 20% of the global rate over the phase, plus the one burst the drain may
    // have left partly refilled. One provider alone at the full rate would be 3×.
    assert!(
        (total as f64) <= expected * 1.2 + BURST,
        "{total} admitted, the cluster's rate is {expected:.0}"
    );
    assert!(
        (total as f64) >= expected * 0.8,
        "{total} admitted, the cluster's rate is {expected:.0}"
    );
    for (i, n) in admitted.iter().enumerate() {
        let share = expected / 3.0;
        assert!(
            (*n as f64) <= share * 1.2 + BURST / 3.0 + 1.0,
            "provider {i} admitted {n}, its share is {share:.0}"
        );
    }

    // One leaves (SIGTERM deregisters at once): the other two take half each.
    let mut gone = providers.remove(2);
    gone.terminate(Duration::from_secs(10))
        .expect("stopped after SIGTERM");
    wait_until(Duration::from_secs(10), || rx.borrow().instances.len() == 2)
        .expect("two providers listed");
    let (admitted, took) = phase(&rt, &clients[..2]);
    let total: u64 = admitted.iter().sum();
    let expected = RATE * took.as_secs_f64();
    eprintln!("2 providers: {admitted:?} = {total} in {took:?} (global rate: {expected:.0})");
    assert!(
        (total as f64) <= expected * 1.2 + BURST && (total as f64) >= expected * 0.8,
        "{total} admitted by two, the cluster's rate is {expected:.0}"
    );
}
