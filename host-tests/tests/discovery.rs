//! Discovery with a real etcd (started per test, see `axle_host_tests::etcd`) and real
//! `axle serve` providers: registration, lease expiry, deregistration on SIGTERM, delayed
//! exposure, namespaces and groups, etcd restarts. Skipped, with a message, only where
//! etcd is not installed; CI installs it.
//!
//! Timing bounds are the (appear within 1 s, gone within the lease TTL) plus the
//! slack etcd itself has (it checks for expired leases every 500 ms), never tighter.

use std::time::Duration;

use axle::discovery::{self, BackendOptions, RegistryUrl, ServiceKey, Snapshot};
use axle_host_tests::etcd::{wait_until, Etcd, Provider};
use axle_host_tests::{axle_bin, rt};
use tokio::sync::watch;

/// A consumer's view of `namespace/service/group` in `etcd`.
fn subscribe(
    rt: &tokio::runtime::Runtime,
    etcd: &Etcd,
    namespace: &str,
    group: &str,
) -> watch::Receiver<Snapshot> {
    let _in = rt.enter();
    let url = RegistryUrl::parse(&etcd.url()).expect("etcd url");
    let options = BackendOptions {
        manifest_endpoints: Default::default(),
        lease_ttl: Duration::from_secs(10),
        resync: Duration::from_millis(500),
        file_poll: Duration::from_millis(100),
    };
    let backend = discovery::open(&url, options).expect("etcd backend");
    backend.subscribe(&ServiceKey::new(namespace, "flaky", group).expect("key"))
}

fn addresses(rx: &watch::Receiver<Snapshot>) -> Vec<String> {
    rx.borrow()
        .instances
        .iter()
        .map(|i| i.address.clone())
        .collect()
}

fn has(rx: &watch::Receiver<Snapshot>, addr: &str) -> bool {
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
    assert_eq!(addresses(&rx), [a.addr.clone()]);
    std::thread::sleep(Duration::from_millis(500));
    etcd.restart();
    wait_until(Duration::from_secs(10), || {
        let s = rx.borrow();
        s.connected && s.lists > lists_before
    })
    .expect("a full listing after etcd came back");
    // Past the lease TTL: the provider kept its registration alive through the restart.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(addresses(&rx), [a.addr.clone()]);
    // And the watch works again: a new provider appears promptly.
    let b = Provider::start(&etcd.url(), &["--lease-ttl-s", "3"]);
    let appeared = wait_until(Duration::from_secs(5), || has(&rx, &b.addr)).expect("b appeared");
    assert!(appeared < Duration::from_secs(1), "{appeared:?}");
}
