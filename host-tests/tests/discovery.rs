//! Discovery with a real etcd (started per test, see `axle_host_tests::etcd`) and real
//! `axle serve` providers: registration, lease expiry, deregistration on SIGTERM, delayed
//! exposure, namespaces and groups, etcd restarts. Skipped, with a message, only where
//! etcd is not installed; CI installs it.
//!
//! Timing bounds are the issue's (appear within 1 s, gone within the lease TTL) plus the
//! slack etcd itself has (it checks for expired leases every 500 ms), never tighter.

use std::time::Duration;

use axle::discovery::{self, Listing, ServiceKey};
use axle_host_tests::etcd::{wait_until, Etcd, Provider};
use axle_host_tests::{axle_bin, rt};
use tokio::sync::watch;

/// A consumer's view of `namespace/service/group` in `etcd`.
fn subscribe(
    rt: &tokio::runtime::Runtime,
    etcd: &Etcd,
    namespace: &str,
    group: &str,
) -> watch::Receiver<Listing> {
    etcd.subscribe(rt, namespace, "flaky", group)
}

fn addresses(rx: &watch::Receiver<Listing>) -> Vec<String> {
    rx.borrow()
        .instances
        .iter()
        .map(|i| i.address.clone())
        .collect()
}

fn has(rx: &watch::Receiver<Listing>, addr: &str) -> bool {
    addresses(rx).iter().any(|a| a == addr)
}

#[test]
fn providers_appear_within_a_second_and_vanish_within_the_lease_after_kill_9() {
    let Some(etcd) = Etcd::start_or_skip("providers_appear_...") else {
        return;
    };
    let rt = rt();
    let rx = subscribe(&rt, &etcd, "default", "default");
    let ttl = 2;
    let mut providers = Vec::new();
    for _ in 0..3 {
        let p = Provider::start(&etcd.url(), &["--lease-ttl-s", &ttl.to_string()]);
        let appeared = wait_until(Duration::from_secs(5), || has(&rx, &p.addr))
            .expect("the provider appeared");
        eprintln!("appeared {appeared:?} after its registration");
        assert!(
            appeared < Duration::from_secs(1),
            "appeared after {appeared:?}"
        );
        providers.push(p);
    }
    assert_eq!(addresses(&rx).len(), 3);
    let instance = rx.borrow().instances[0].clone();
    assert!(instance.start_ms.is_some(), "start time registered");
    assert_eq!(instance.weight, 100);

    let mut victim = providers.remove(1);
    let addr = victim.addr.clone();
    victim.kill9();
    let gone = wait_until(Duration::from_secs(10), || !has(&rx, &addr)).expect("lease expired");
    eprintln!("gone {gone:?} after kill -9 (lease TTL {ttl} s)");
    // etcd revokes expired leases on a 500 ms tick: the TTL plus that tick and a margin.
    assert!(
        gone <= Duration::from_millis(ttl * 1000 + 1500),
        "still listed {gone:?} after kill -9"
    );
    assert_eq!(addresses(&rx).len(), 2, "the others stay");
}

#[test]
fn sigterm_deregisters_at_once_and_exits_cleanly() {
    let Some(etcd) = Etcd::start_or_skip("sigterm_deregisters_...") else {
        return;
    };
    let rt = rt();
    let rx = subscribe(&rt, &etcd, "default", "default");
    // A long lease: only deregistration can remove it quickly.
    let mut p = Provider::start(&etcd.url(), &["--lease-ttl-s", "60", "--drain-ms", "500"]);
    wait_until(Duration::from_secs(5), || has(&rx, &p.addr)).expect("appeared");
    let status = p
        .terminate(Duration::from_secs(10))
        .expect("exited after SIGTERM");
    assert!(status.success(), "{status:?}");
    let gone = wait_until(Duration::from_secs(5), || !has(&rx, &p.addr));
    assert!(
        gone.is_some_and(|d| d < Duration::from_secs(2)),
        "still listed after a graceful stop: {gone:?}"
    );
}

#[test]
fn registration_waits_for_readiness() {
    let Some(etcd) = Etcd::start_or_skip("registration_waits_for_readiness") else {
        return;
    };
    let rt = rt();
    let rx = subscribe(&rt, &etcd, "default", "default");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    // Watch for the address from another thread while the provider starts: it must not
    // be visible before the readiness delay has passed.
    let p = {
        let rx = rx.clone();
        let seen = seen.clone();
        let watcher = std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_secs(20) {
                if !rx.borrow().instances.is_empty() {
                    *seen.lock().unwrap() = Some(std::time::Instant::now());
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let p = Provider::start(&etcd.url(), &["--ready-delay-ms", "1500"]);
        watcher.join().unwrap();
        p
    };
    let seen = seen.lock().unwrap().expect("registered eventually");
    let hidden = seen.duration_since(p.listening_at);
    assert!(
        hidden >= Duration::from_millis(1200),
        "visible {hidden:?} after listening, before the 1.5 s readiness delay"
    );
    assert!(p.registered_at.duration_since(p.listening_at) >= Duration::from_millis(1200));
}

#[test]
fn namespaces_and_groups_are_separate_key_spaces() {
    let Some(etcd) = Etcd::start_or_skip("namespaces_and_groups_...") else {
        return;
    };
    let rt = rt();
    let prod_blue = subscribe(&rt, &etcd, "prod", "blue");
    let prod_default = subscribe(&rt, &etcd, "prod", "default");
    let test_blue = subscribe(&rt, &etcd, "test", "blue");
    let p = Provider::start(
        &etcd.url(),
        &["--namespace", "prod", "--group", "blue", "--zone", "z1"],
    );
    assert!(p
        .keys
        .iter()
        .all(|k| k.starts_with("/axle/prod/providers/")));
    wait_until(Duration::from_secs(5), || has(&prod_blue, &p.addr)).expect("prod/blue sees it");
    // Give a wrong key space time to (wrongly) see it too.
    std::thread::sleep(Duration::from_millis(300));
    assert!(addresses(&prod_default).is_empty());
    assert!(addresses(&test_blue).is_empty());
    let i = prod_blue.borrow().instances[0].clone();
    assert_eq!(i.zone.as_deref(), Some("z1"));
}

#[test]
fn bad_registry_values_fail_clearly() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(axle_bin())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("run axle serve");
        (out.status, String::from_utf8_lossy(&out.stderr).to_string())
    };
    for (url, expect) in [
        ("etcd://", "etcd:// needs HOST:PORT"),
        ("etcd://127.0.0.1", "not host:port"),
        ("consul://x:1", "expected `static`"),
    ] {
        let (status, err) = run(&["--registry", url]);
        assert_eq!(status.code(), Some(1), "{url}: {err}");
        assert!(err.contains(expect), "{url}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (status, err) = run(&["--registry", "etcd://127.0.0.1:1", "--group", "a/b"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("group `a/b`"), "{err}");
    // Unreachable etcd: a provider asked to register says so and stops.
    let (status, err) = run(&["--registry", "etcd://127.0.0.1:1"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("cannot register"), "{err}");
}

#[test]
fn a_restarted_etcd_keeps_registrations_and_consumers_resync() {
    let Some(mut etcd) = Etcd::start_or_skip("a_restarted_etcd_...") else {
        return;
    };
    let rt = rt();
    let rx = subscribe(&rt, &etcd, "default", "default");
    let a = Provider::start(&etcd.url(), &["--lease-ttl-s", "3"]);
    wait_until(Duration::from_secs(5), || has(&rx, &a.addr)).expect("appeared");
    let lists_before = rx.borrow().lists;
    etcd.stop();
    wait_until(Duration::from_secs(10), || !rx.borrow().connected).expect("noticed");
    // Down: the cached set stays.
    assert_eq!(addresses(&rx), std::slice::from_ref(&a.addr));
    std::thread::sleep(Duration::from_millis(500));
    etcd.restart();
    wait_until(Duration::from_secs(10), || {
        let s = rx.borrow();
        s.connected && s.lists > lists_before
    })
    .expect("a full listing after etcd came back");
    // Past the lease TTL: the provider kept its registration alive through the restart.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(addresses(&rx), std::slice::from_ref(&a.addr));
    // And the watch works again: a new provider appears promptly.
    let b = Provider::start(&etcd.url(), &["--lease-ttl-s", "3"]);
    let appeared = wait_until(Duration::from_secs(5), || has(&rx, &b.addr)).expect("b appeared");
    assert!(appeared < Duration::from_secs(1), "{appeared:?}");
}

// ---- consumers: a real client following etcd under load ------------------------------

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use axle::client::{CallOptions, Client};
use axle::discovery::config::Groups;
use axle::discovery::follow::Follow;
use axle::discovery::EtcdConfig;
use axle_host_tests::TestHost;

/// A client of `flaky` that finds its providers in `etcd` (`groups`), with `selector`.
fn following_client(
    rt: &tokio::runtime::Runtime,
    t: &TestHost,
    etcd: &Etcd,
    selector: &str,
    groups: Groups,
    warmup: Duration,
) -> (Client, Follow) {
    following_client_with(rt, t, etcd, selector, groups, warmup, EtcdConfig::default())
}

/// [`following_client`], reaching etcd and checking its entries as `config` says.
/// A consumer following etcd with `config` finds the one provider at `addr` and calls it.
fn finds_and_calls(
    rt: &tokio::runtime::Runtime,
    t: &TestHost,
    etcd: &Etcd,
    addr: &str,
    config: EtcdConfig,
) -> (Client, Follow) {
    let (client, follow) = following_client_with(
        rt,
        t,
        etcd,
        "round-robin",
        primary("default"),
        Duration::ZERO,
        config,
    );
    wait_until(Duration::from_secs(5), || follow.state().endpoints == 1).expect("found");
    assert!(table_has(&client, addr));
    let reply = rt.block_on(client.call_raw(
        "flaky",
        "echo",
        bytes::Bytes::from_static(b"hi"),
        &CallOptions::timeout(Duration::from_secs(2)),
    ));
    assert!(reply.is_ok(), "{:?}", reply.err());
    (client, follow)
}

fn following_client_with(
    rt: &tokio::runtime::Runtime,
    t: &TestHost,
    etcd: &Etcd,
    selector: &str,
    groups: Groups,
    warmup: Duration,
    config: EtcdConfig,
) -> (Client, Follow) {
    let _in = rt.enter();
    let mut m = axle::manifest::Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    m.services.entry("flaky".into()).or_default().selector = Some(selector.into());
    if let Some(p) = m.plugins.get_mut(selector) {
        p.timeout_ms = 1000;
        if selector.contains("random") {
            p.config.insert("seed".into(), toml::Value::Integer(7));
        }
    }
    let client = Client::new(
        &t.host,
        axle::client::ClientConfig::new(m).endpoints("flaky", Vec::new()),
    )
    .expect("client");
    let backend = etcd.backend(rt, config);
    let follow = Follow::start(
        Arc::new(client.clone()),
        backend.as_ref(),
        "default",
        "flaky",
        groups,
        warmup,
        Duration::from_millis(100),
    )
    .expect("follow");
    (client, follow)
}

fn primary(g: &str) -> Groups {
    Groups {
        primary: g.into(),
        secondary: None,
    }
}

/// Calls `flaky/echo` from `workers` tasks until stopped; counts by answering address.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    by_addr: Arc<Mutex<Vec<(std::time::Instant, String)>>>,
    errors: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(rt: &tokio::runtime::Runtime, client: &Client, workers: usize) -> Load {
        let load = Load {
            stop: Arc::default(),
            ok: Arc::default(),
            failed: Arc::default(),
            by_addr: Arc::default(),
            errors: Arc::default(),
            tasks: Vec::new(),
        };
        let mut tasks = Vec::new();
        for _ in 0..workers {
            let (client, stop, ok, failed, by_addr, errors) = (
                client.clone(),
                load.stop.clone(),
                load.ok.clone(),
                load.failed.clone(),
                load.by_addr.clone(),
                load.errors.clone(),
            );
            tasks.push(rt.spawn(async move {
                let body = bytes::Bytes::from_static(b"ping");
                let options = CallOptions::timeout(Duration::from_secs(2));
                // Bounded: at most 200k calls per worker whatever the timing.
                for _ in 0..200_000 {
                    if stop.load(Relaxed) {
                        break;
                    }
                    match client
                        .call_raw("flaky", "echo", body.clone(), &options)
                        .await
                    {
                        Ok(reply) => {
                            ok.fetch_add(1, Relaxed);
                            let addr = reply
                                .endpoint
                                .and_then(|id| {
                                    client
                                        .endpoints()
                                        .into_iter()
                                        .find(|e| e.id == id)
                                        .map(|e| e.address)
                                })
                                .unwrap_or_default();
                            by_addr
                                .lock()
                                .unwrap()
                                .push((std::time::Instant::now(), addr));
                        }
                        Err(e) => {
                            failed.fetch_add(1, Relaxed);
                            errors.lock().unwrap().push(e.to_string());
                            // No endpoint yet: do not spin.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
            }));
        }
        Load { tasks, ..load }
    }

    fn stop(
        self,
        rt: &tokio::runtime::Runtime,
    ) -> (u64, u64, Vec<(std::time::Instant, String)>, Vec<String>) {
        self.stop.store(true, Relaxed);
        for t in self.tasks {
            let _ = rt.block_on(t);
        }
        let by_addr = std::mem::take(&mut *self.by_addr.lock().unwrap());
        let errors = std::mem::take(&mut *self.errors.lock().unwrap());
        (
            self.ok.load(Relaxed),
            self.failed.load(Relaxed),
            by_addr,
            errors,
        )
    }
}

fn table_has(client: &Client, addr: &str) -> bool {
    client.endpoints().iter().any(|e| e.address == addr)
}

#[test]
fn an_etcd_restart_under_load_fails_no_call_and_resyncs() {
    let Some(mut etcd) = Etcd::start_or_skip("an_etcd_restart_under_load_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    let providers: Vec<Provider> = (0..3).map(|_| Provider::start(&etcd.url(), &[])).collect();
    let (client, follow) = following_client(
        &rt,
        &t,
        &etcd,
        "round-robin",
        primary("default"),
        Duration::ZERO,
    );
    wait_until(Duration::from_secs(5), || follow.state().endpoints == 3).expect("3 discovered");
    let load = Load::start(&rt, &client, 4);
    std::thread::sleep(Duration::from_millis(500));
    let lists_before = follow.state().lists;
    etcd.stop();
    wait_until(Duration::from_secs(10), || !follow.state().connected).expect("noticed etcd down");
    std::thread::sleep(Duration::from_millis(1500));
    // Down for a while: still 3 endpoints, serving from the cache.
    assert_eq!(follow.state().endpoints, 3);
    etcd.restart();
    wait_until(Duration::from_secs(10), || {
        let s = follow.state();
        s.connected && s.lists > lists_before
    })
    .expect("resynced after etcd returned");
    std::thread::sleep(Duration::from_millis(500));
    let (ok, failed, by_addr, errors) = load.stop(&rt);
    assert_eq!(
        failed,
        0,
        "failed calls: {:?}",
        &errors[..errors.len().min(5)]
    );
    assert!(ok > 100, "only {ok} calls");
    for p in &providers {
        let n = by_addr.iter().filter(|(_, a)| *a == p.addr).count();
        assert!(n as u64 * 5 > ok, "{}: {n} of {ok}", p.addr);
    }
    assert_eq!(follow.state().endpoints, 3);
}

#[test]
fn a_rolling_restart_under_load_fails_no_request() {
    let Some(etcd) = Etcd::start_or_skip("a_rolling_restart_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    let args = ["--lease-ttl-s", "5", "--drain-ms", "3000"];
    let mut providers: Vec<Provider> = (0..3)
        .map(|_| Provider::start(&etcd.url(), &args))
        .collect();
    let (client, follow) = following_client(
        &rt,
        &t,
        &etcd,
        "round-robin",
        primary("default"),
        Duration::ZERO,
    );
    wait_until(Duration::from_secs(5), || follow.state().endpoints == 3).expect("3 discovered");
    let load = Load::start(&rt, &client, 8);
    std::thread::sleep(Duration::from_millis(300));
    let old: Vec<String> = providers.iter().map(|p| p.addr.clone()).collect();
    for i in 0..3 {
        // One by one: stop (SIGTERM: goaway, deregister, drain), then start its successor.
        let status = providers[i]
            .terminate(Duration::from_secs(10))
            .expect("stopped");
        assert!(status.success(), "{status:?}");
        wait_until(Duration::from_secs(5), || !table_has(&client, &old[i]))
            .expect("left the table");
        let next = Provider::start(&etcd.url(), &args);
        wait_until(Duration::from_secs(5), || table_has(&client, &next.addr)).expect("joined");
        providers[i] = next;
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed, by_addr, errors) = load.stop(&rt);
    assert_eq!(
        failed,
        0,
        "failed requests: {:?}",
        &errors[..errors.len().min(5)]
    );
    assert!(ok > 100, "only {ok} calls");
    for p in &providers {
        assert!(
            by_addr.iter().any(|(_, a)| *a == p.addr),
            "the new provider {} got no traffic",
            p.addr
        );
    }
    assert_eq!(follow.state().endpoints, 3);
}

#[test]
fn a_new_providers_share_rises_over_its_warm_up() {
    let Some(etcd) = Etcd::start_or_skip("a_new_providers_share_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    // Two providers warm from the start, then one that advertises a 4 s warm-up.
    let warm: Vec<Provider> = (0..2)
        .map(|_| Provider::start(&etcd.url(), &["--warmup-ms", "1"]))
        .collect();
    let (client, follow) = following_client(
        &rt,
        &t,
        &etcd,
        "weighted-random",
        primary("default"),
        Duration::from_secs(60),
    );
    wait_until(Duration::from_secs(5), || follow.state().endpoints == 2).expect("2 discovered");
    let load = Load::start(&rt, &client, 4);
    std::thread::sleep(Duration::from_millis(300));
    let new = Provider::start(&etcd.url(), &["--warmup-ms", "4000"]);
    let t0 = new.registered_at;
    std::thread::sleep(Duration::from_millis(5500));
    let (_, failed, by_addr, errors) = load.stop(&rt);
    assert_eq!(failed, 0, "{:?}", &errors[..errors.len().min(5)]);
    let share = |from: f64, to: f64| {
        let window: Vec<_> = by_addr
            .iter()
            .filter(|(at, _)| {
                let s = at.saturating_duration_since(t0).as_secs_f64();
                *at >= t0 && s >= from && s < to
            })
            .collect();
        let mine = window.iter().filter(|(_, a)| *a == new.addr).count();
        assert!(
            window.len() >= 50,
            "only {} calls in {from}..{to} s",
            window.len()
        );
        mine as f64 / window.len() as f64
    };
    let (early, middle, late) = (share(0.0, 1.0), share(1.5, 2.5), share(4.5, 5.5));
    eprintln!("new provider's share: 0-1 s {early:.3}, 1.5-2.5 s {middle:.3}, 4.5-5.5 s {late:.3}");
    // Weighted by 100:100:w, w ramping 0 → 100 over 4 s: ~6%, ~20%, ~33%.
    assert!(
        early < 0.15,
        "early share {early:.3}: it jumped instead of ramping"
    );
    assert!(
        middle > early + 0.03,
        "no rise: {early:.3} then {middle:.3}"
    );
    assert!(
        late > 0.25 && late > middle + 0.03,
        "not at full weight: {middle:.3} then {late:.3}"
    );
    drop(warm);
}

#[test]
fn traffic_moves_to_the_secondary_group_when_the_primary_empties_and_back() {
    let Some(etcd) = Etcd::start_or_skip("traffic_moves_to_the_secondary_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    let mut blue = Provider::start(&etcd.url(), &["--group", "blue", "--drain-ms", "1000"]);
    let green = Provider::start(&etcd.url(), &["--group", "green"]);
    let groups = Groups {
        primary: "blue".into(),
        secondary: Some("green".into()),
    };
    let (client, follow) = following_client(&rt, &t, &etcd, "round-robin", groups, Duration::ZERO);
    wait_until(Duration::from_secs(5), || follow.state().group == "blue").expect("on blue");
    assert_eq!(
        follow.state().endpoints,
        1,
        "green is not used while blue has providers"
    );

    let load = Load::start(&rt, &client, 2);
    std::thread::sleep(Duration::from_millis(500));
    let emptied = std::time::Instant::now();
    assert!(blue
        .terminate(Duration::from_secs(10))
        .is_some_and(|s| s.success()));
    wait_until(Duration::from_secs(5), || follow.state().group == "green").expect("moved to green");
    std::thread::sleep(Duration::from_millis(700));
    let back = Provider::start(&etcd.url(), &["--group", "blue"]);
    let recovered = std::time::Instant::now();
    wait_until(Duration::from_secs(5), || follow.state().group == "blue").expect("back to blue");
    assert_eq!(follow.state().endpoints, 1, "green left the table again");
    std::thread::sleep(Duration::from_millis(700));
    let (ok, failed, by_addr, errors) = load.stop(&rt);
    let count = |addr: &str, from: std::time::Instant, to: std::time::Instant| {
        by_addr
            .iter()
            .filter(|(at, a)| a == addr && *at >= from && *at < to)
            .count()
    };
    let far = emptied + Duration::from_secs(3600);
    let start = emptied - Duration::from_secs(3600);
    assert_eq!(
        count(&green.addr, start, emptied),
        0,
        "green before blue emptied"
    );
    assert!(count(&blue.addr, start, emptied) > 10);
    assert!(
        count(&green.addr, emptied, recovered) > 10,
        "green took over"
    );
    let settled = recovered + Duration::from_millis(500);
    assert!(count(&back.addr, settled, far) > 10, "blue took back");
    assert_eq!(
        count(&green.addr, settled, far),
        0,
        "green after blue recovered"
    );
    // Only the instant between blue's goaway and the switch may fail (no candidate at all).
    assert!(
        failed * 50 <= ok,
        "{failed} failed of {ok}: {:?}",
        &errors[..errors.len().min(5)]
    );
}

// ---- discovery you can trust: hostile entries, credentials, TLS -------------------------

use axle::discovery::admit::Network;
use axle::discovery::config::PasswordSource;
use axle::discovery::Provider as Registered;
use axle_host_tests::etcd::EtcdTls;
use axle_host_tests::TestPki;

/// A listener that only counts who connects: where a hostile entry points, so that a
/// dial to it would be seen.
struct Trap {
    addr: String,
    hits: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Trap {
    fn on(ip: &str) -> Trap {
        let listener = std::net::TcpListener::bind((ip, 0)).expect("trap listener");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("trap address").to_string();
        let (hits, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Relaxed) {
                match listener.accept() {
                    Ok(_) => {
                        h.fetch_add(1, Relaxed);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Trap { addr, hits, stop }
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// Writes `value` at `key` in `etcd` as an ordinary (unauthenticated, plain) client.
fn put_raw(rt: &tokio::runtime::Runtime, etcd: &Etcd, key: &str, value: Vec<u8>) {
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.client_url()], None)
            .await
            .expect("raw etcd client");
        c.put(key, value, None).await.expect("put");
    });
}

const FLAKY: &str = "/axle/default/providers/flaky/default/";

#[test]
fn hostile_registry_entries_are_skipped_never_dialled_and_the_rest_keeps_serving() {
    let Some(etcd) = Etcd::start_or_skip("hostile_registry_entries_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    let good = Provider::start(&etcd.url(), &[]);
    // Where each hostile entry points: a consumer that dialled one would be seen there.
    // 127.0.0.2 is loopback too, but outside the allowed network below.
    let outside = Trap::on("127.0.0.2");
    let (big, many_tags, other_key) = (
        Trap::on("127.0.0.1"),
        Trap::on("127.0.0.1"),
        Trap::on("127.0.0.1"),
    );
    // Two before the consumer lists (the listing path) ...
    put_raw(
        &rt,
        &etcd,
        &format!("{FLAKY}nohost"),
        br#"{"address":"nohost"}"#.to_vec(),
    );
    let mut p = Registered::new(big.addr.as_str());
    p.tags.insert("pad".into(), "x".repeat(20_000));
    put_raw(&rt, &etcd, &format!("{FLAKY}{}", big.addr), p.encode());
    let config = EtcdConfig {
        limits: axle::discovery::admit::EntryLimits {
            allowed_networks: vec![Network::parse("127.0.0.1/32").unwrap()],
            ..Default::default()
        },
        ..EtcdConfig::default()
    };
    let (client, follow) = following_client_with(
        &rt,
        &t,
        &etcd,
        "round-robin",
        primary("default"),
        Duration::ZERO,
        config,
    );
    wait_until(Duration::from_secs(5), || follow.state().endpoints == 1).expect("the good one");
    assert_eq!(follow.state().skipped, 2, "{:?}", follow.state());
    let load = Load::start(&rt, &client, 4);
    std::thread::sleep(Duration::from_millis(200));
    // ... three while it watches (the event path).
    let put = |trap: &Trap, p: Registered| {
        put_raw(&rt, &etcd, &format!("{FLAKY}{}", trap.addr), p.encode())
    };
    put(&outside, Registered::new(outside.addr.as_str()));
    let mut p = Registered::new(many_tags.addr.as_str());
    for i in 0..40 {
        p.tags.insert(format!("t{i}"), "v".into());
    }
    put(&many_tags, p);
    // A key naming one address whose value points elsewhere.
    put_raw(
        &rt,
        &etcd,
        &format!("{FLAKY}127.0.0.1:1"),
        Registered::new(other_key.addr.as_str()).encode(),
    );
    wait_until(Duration::from_secs(5), || follow.state().skipped == 5).expect("5 skipped");
    // Re-lists (every 500 ms here) find the same entries: reported once, not again.
    std::thread::sleep(Duration::from_millis(1500));
    let (ok, failed, by_addr, errors) = load.stop(&rt);
    assert_eq!(failed, 0, "{:?}", &errors[..errors.len().min(5)]);
    assert!(ok > 100, "only {ok} calls");
    assert!(
        by_addr.iter().all(|(_, a)| *a == good.addr),
        "a call went elsewhere"
    );
    let table: Vec<String> = client.endpoints().into_iter().map(|e| e.address).collect();
    assert_eq!(table, std::slice::from_ref(&good.addr));
    // A real consumer process (`axle call`, allowed-networks from its manifest) calls the
    // good provider and logs each skipped entry once.
    let dir = tempfile::tempdir().expect("dir");
    let m = manifest_with_etcd(dir.path(), "allowed-networks = [\"127.0.0.1/32\"]");
    let out = std::process::Command::new(axle_bin())
        .args(["call", "--manifest", &m, "--registry", &etcd.url()])
        .args(["flaky/echo", r#"{"a":1}"#])
        .env("AXLE_LOG", "warn")
        .output()
        .expect("run axle call");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let skips: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("skipping a registry entry"))
        .collect();
    assert_eq!(skips.len(), 5, "{err}");
    eprintln!("{}", skips.join("\n"));
    for why in [
        "not host:port",
        "max-value-bytes",
        "outside allowed-networks",
        "max-tags",
        "key names",
    ] {
        assert!(
            skips.iter().any(|l| l.contains(why)),
            "no `{why}` in {skips:#?}"
        );
    }
    for trap in [&outside, &big, &many_tags, &other_key] {
        assert_eq!(trap.hits.load(Relaxed), 0, "{} was dialled", trap.addr);
    }
    let state = follow.state();
    assert_eq!((state.skipped, state.endpoints), (5, 1), "{state:?}");
    // Each reason is there for whoever looks (the log says the same, rate-limited).
    let rx = subscribe(&rt, &etcd, "default", "default");
    wait_until(Duration::from_secs(5), || rx.borrow().lists > 0).expect("listed");
    let last = rx.borrow().last_skipped.clone().unwrap_or_default();
    assert!(!last.is_empty() && rx.borrow().skipped >= 3, "{last}");
}

/// Registers `flaky` at `address` through `backend`: the error, if refused.
fn try_register(
    rt: &tokio::runtime::Runtime,
    backend: &dyn discovery::Backend,
    address: &str,
) -> Result<discovery::Registration, String> {
    let key = ServiceKey::new("default", "flaky", "default").expect("key");
    rt.block_on(backend.register(&key, &Registered::new(address)))
        .map_err(|e| e.to_string())
}

/// The embedded manifest with `[discovery.etcd]` holding `etcd`, for `axle serve`.
fn manifest_with_etcd(dir: &std::path::Path, etcd: &str) -> String {
    let text = format!(
        "{}\n[discovery.etcd]\n{etcd}\n",
        axle::manifest::defaults::EMBEDDED_MANIFEST
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

#[test]
fn etcd_with_users_lets_only_the_right_password_in() {
    let Some(etcd) = Etcd::start_or_skip("etcd_with_users_...") else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    // root (needed to turn auth on) and `axle`, allowed /axle/ only.
    rt.block_on(async {
        use etcd_client::Permission;
        let mut c = etcd_client::Client::connect([etcd.client_url()], None)
            .await
            .expect("raw etcd client");
        c.user_add("root", "root-pw", None).await.expect("root");
        c.user_grant_role("root", "root").await.expect("root role");
        c.role_add("axle-rw").await.expect("role");
        c.role_grant_permission("axle-rw", Permission::read_write("/axle/").with_prefix())
            .await
            .expect("grant");
        c.user_add("axle", "s3cret", None).await.expect("user");
        c.user_grant_role("axle", "axle-rw")
            .await
            .expect("user role");
        c.auth_enable().await.expect("auth on");
    });
    let dir = tempfile::tempdir().expect("dir");
    let pw = |name: &str, text: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).expect("password file");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        f
    };
    let as_user = |file: std::path::PathBuf| EtcdConfig {
        user: Some("axle".into()),
        password: Some(PasswordSource::File(file)),
        ..EtcdConfig::default()
    };
    // A real provider with the password in a file next to its manifest.
    pw("etcd.pw", "s3cret\n");
    let m = manifest_with_etcd(dir.path(), "user = \"axle\"\npassword-file = \"etcd.pw\"");
    let provider = Provider::start(&etcd.url(), &["--manifest", &m]);
    let (_client, _follow) = finds_and_calls(
        &rt,
        &t,
        &etcd,
        &provider.addr,
        as_user(dir.path().join("etcd.pw")),
    );
    // Nobody else gets in: no credentials, a wrong password.
    let anonymous = etcd.backend(&rt, EtcdConfig::default());
    let wrong = etcd.backend(&rt, as_user(pw("wrong.pw", "guess")));
    for (who, b) in [("anonymous", &anonymous), ("wrong password", &wrong)] {
        let refused = try_register(&rt, b.as_ref(), "127.0.0.1:7399").err();
        let says = refused.unwrap_or_else(|| panic!("{who} registered"));
        if who == "wrong password" {
            assert!(says.contains("authentication failed"), "{says}");
        }
        let rx = {
            let _in = rt.enter();
            b.subscribe(&ServiceKey::new("default", "flaky", "default").unwrap())
        };
        wait_until(Duration::from_secs(5), || rx.borrow().error.is_some()).expect("an error");
        let s = rx.borrow().clone();
        assert!(s.instances.is_empty() && !s.connected, "{who}: {s:?}");
        eprintln!("{who}: {}", s.error.unwrap_or_default());
    }
}

#[test]
fn etcd_over_tls_needs_its_ca_and_a_client_certificate() {
    let pki = TestPki::new();
    let (cert, key) = pki.issue("etcd", "127.0.0.1");
    let tls = EtcdTls {
        cert,
        key,
        client_ca: pki.ca.clone(),
    };
    let Some(etcd) = Etcd::start_tls_or_skip("etcd_over_tls_...", tls) else {
        return;
    };
    let rt = rt();
    let t = TestHost::new();
    let (client_cert, client_key) = pki.issue("client", "axle-client");
    let config = EtcdConfig {
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(client_cert.clone()),
        key_file: Some(client_key.clone()),
        ..EtcdConfig::default()
    };
    // A real provider registers over TLS, a consumer follows over TLS and calls it.
    let m = manifest_with_etcd(
        pki.dir.path(),
        &format!(
            "ca-file = {:?}\ncert-file = {:?}\nkey-file = {:?}",
            pki.ca.display().to_string(),
            client_cert.display().to_string(),
            client_key.display().to_string()
        ),
    );
    let provider = Provider::start(&etcd.url(), &["--manifest", &m]);
    let (_client, follow) = finds_and_calls(&rt, &t, &etcd, &provider.addr, config.clone());
    // Refused: plain HTTP, no client certificate, a CA that did not issue etcd's certificate.
    let other = TestPki::new();
    let (other_cert, other_key) = other.issue("client", "axle-client");
    for (what, c) in [
        ("plain HTTP", EtcdConfig::default()),
        (
            "no client certificate",
            EtcdConfig {
                ca_file: Some(pki.ca.clone()),
                ..EtcdConfig::default()
            },
        ),
        (
            "another CA",
            EtcdConfig {
                ca_file: Some(other.ca.clone()),
                ..config.clone()
            },
        ),
        (
            "a client certificate from another CA",
            EtcdConfig {
                cert_file: Some(other_cert.clone()),
                key_file: Some(other_key.clone()),
                ..config.clone()
            },
        ),
    ] {
        let b = etcd.backend(&rt, c);
        let refused = try_register(&rt, b.as_ref(), "127.0.0.1:7399");
        assert!(refused.is_err(), "{what}: registered");
        eprintln!("{what}: {}", refused.err().unwrap_or_default());
    }
    assert_eq!(
        follow.state().endpoints,
        1,
        "only the provider that used TLS"
    );
}
