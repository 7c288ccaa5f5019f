//! Discovery with a real etcd (started per test, see `axle_host_tests::etcd`) and real
//! `axle serve` providers: registration, lease expiry, deregistration on SIGTERM, delayed
//! exposure, namespaces and groups, etcd restarts. Skipped, with a message, only where
//! etcd is not installed; CI installs it.
//!
//! Timing bounds are the (appear within 1 s, gone within the lease TTL) plus the
//! slack etcd itself has (it checks for expired leases every 500 ms), never tighter.

use std::time::Duration;

use axle::discovery::{self, BackendOptions, Listing, RegistryUrl, ServiceKey};
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
    let _in = rt.enter();
    let url = RegistryUrl::parse(&etcd.url()).expect("etcd url");
    let options = BackendOptions {
        parse_endpoints: axle::manifest::parse_endpoints,
        manifest_endpoints: Default::default(),
        lease_ttl: Duration::from_secs(10),
        resync: Duration::from_millis(500),
        file_poll: Duration::from_millis(100),
    };
    let backend = discovery::open(&url, options).expect("etcd backend");
    backend.subscribe(&ServiceKey::new(namespace, "flaky", group).expect("key"))
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
    let url = RegistryUrl::parse(&etcd.url()).expect("etcd url");
    let backend = discovery::open(
        &url,
        BackendOptions {
            parse_endpoints: axle::manifest::parse_endpoints,
            manifest_endpoints: Default::default(),
            lease_ttl: Duration::from_secs(10),
            resync: Duration::from_millis(500),
            file_poll: Duration::from_millis(100),
        },
    )
    .expect("etcd backend");
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
