//! The kernel's key ids: per limiter, and memoised per thread without crossing limiters.

use super::*;

/// Admits everything: these tests are about the kernel's key ids.
struct Open;

impl NativeLimiter for Open {
    fn key_defined(&mut self, _id: u32, _key: axle_spi::LimitKey) {}
    fn acquire(&mut self, _key: u32, _permits: u32, _now_ns: u64) -> Admission {
        Admission::Admit
    }
}

fn limiter(key_on: crate::KeyOn) -> LimiterPlugin {
    let owner = crate::pool::Owner::named("open");
    LimiterPlugin::native(Box::new(Open), owner, true, key_on, Arc::default())
}

fn parts<'a>(method: &'a str, app: &'a str, ip: &str) -> KeyParts<'a> {
    KeyParts {
        service: "orders",
        method,
        consumer_app: app,
        consumer_ip: ip.parse().unwrap(),
    }
}

#[test]
fn a_thread_asking_two_limiters_gets_each_ones_own_ids() {
    // The thread's memo holds the last key asked for: asking `b` after `a` for the
    // same key must not answer `a`'s id.
    let (a, b) = (
        limiter(crate::KeyOn::default()),
        limiter(crate::KeyOn::default()),
    );
    assert_eq!(a.key_id_of(parts("get", "", "10.0.0.1")), 0);
    assert_eq!(a.key_id_of(parts("put", "", "10.0.0.1")), 1);
    assert_eq!(b.key_id_of(parts("put", "", "10.0.0.1")), 0);
    assert_eq!(a.key_id_of(parts("put", "", "10.0.0.1")), 1);
    assert_eq!(
        a.key_id_of(parts("put", "", "10.0.0.1")),
        1,
        "from the memo"
    );
    assert_eq!(b.key_id_of(parts("put", "", "10.0.0.1")), 0);
    assert_eq!((a.key_count(), b.key_count()), (2, 1));
}

#[test]
fn the_memo_answers_only_the_same_key_as_the_limiter_keys_it() {
    let by_ip = limiter(crate::KeyOn::default());
    let get = by_ip.key_id_of(parts("get", "billing", "10.0.0.1"));
    assert_eq!(get, by_ip.key_id_of(parts("get", "billing", "10.0.0.1")));
    // Another caller's address is another key; the app is not part of it here.
    let other = by_ip.key_id_of(parts("get", "billing", "10.0.0.2"));
    assert_ne!(other, get);
    assert_eq!(by_ip.key_id_of(parts("get", "search", "10.0.0.2")), other);
    assert_eq!(by_ip.key_id_of(parts("get", "billing", "10.0.0.1")), get);

    let by_app = limiter(crate::KeyOn {
        consumer_app: true,
        consumer_ip: false,
    });
    let billing = by_app.key_id_of(parts("get", "billing", "10.0.0.1"));
    assert_eq!(
        by_app.key_id_of(parts("get", "billing", "10.0.0.9")),
        billing
    );
    assert_ne!(
        by_app.key_id_of(parts("get", "search", "10.0.0.9")),
        billing
    );
    assert_eq!(by_app.key_count(), 2);
}

#[test]
fn threads_share_the_table_not_the_memo() {
    let l = Arc::new(limiter(crate::KeyOn::default()));
    let here = l.key_id_of(parts("get", "", "10.0.0.1"));
    let there = {
        let l = l.clone();
        std::thread::spawn(move || {
            (
                l.key_id_of(parts("put", "", "10.0.0.1")),
                l.key_id_of(parts("get", "", "10.0.0.1")),
            )
        })
        .join()
        .unwrap()
    };
    assert_eq!(there, (1, here));
    assert_eq!(l.key_id_of(parts("put", "", "10.0.0.1")), 1);
}

/// Admits everything and keeps the `now-ns` of every call.
struct Clocked(Arc<std::sync::Mutex<Vec<u64>>>);

impl NativeLimiter for Clocked {
    fn key_defined(&mut self, _id: u32, _key: axle_spi::LimitKey) {}
    fn acquire(&mut self, _key: u32, _permits: u32, now_ns: u64) -> Admission {
        self.0.lock().unwrap().push(now_ns);
        Admission::Admit
    }
}

#[test]
fn the_plugin_clock_never_goes_back_between_calls() {
    // A caller's reading is taken before it gets the instance: one taken earlier may
    // arrive later, and the plugin must not see time go back.
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let owner = crate::pool::Owner::named("clocked");
    let l = LimiterPlugin::native(
        Box::new(Clocked(seen.clone())),
        owner,
        true,
        crate::KeyOn::default(),
        Arc::default(),
    );
    let key = l.key_id_of(parts("get", "", "10.0.0.1"));
    for at in [1_000, 5_000, 3_000, 7_000] {
        l.acquire_at(key, 1, at);
    }
    let now = axle_core::now_ns();
    l.acquire(key, 1);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(&seen[..4], &[1_000, 5_000, 5_000, 7_000]);
    assert!(seen[4] >= now.max(7_000), "{seen:?}");
}

/// A leasing limiter: admits every request, leases `lease` more with each `acquire-lease`,
/// and counts what it was asked.
struct Leasing {
    lease: u32,
    asked: Arc<std::sync::Mutex<Vec<&'static str>>>,
}

impl NativeLimiter for Leasing {
    fn key_defined(&mut self, _id: u32, _key: axle_spi::LimitKey) {}
    fn acquire(&mut self, _key: u32, _permits: u32, _now_ns: u64) -> Admission {
        self.asked.lock().unwrap().push("acquire");
        Admission::Admit
    }
    fn wants_leases(&self) -> bool {
        true
    }
    fn acquire_lease(&mut self, _key: u32, _now_ns: u64) -> (Admission, u32) {
        self.asked.lock().unwrap().push("acquire-lease");
        (Admission::Admit, self.lease)
    }
}

#[test]
fn a_lease_admits_the_threads_next_requests_under_its_key_without_a_call() {
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let owner = crate::pool::Owner::named("leasing");
    let twin = Leasing {
        lease: 3,
        asked: asked.clone(),
    };
    let l = LimiterPlugin::native(
        Box::new(twin),
        owner,
        true,
        crate::KeyOn::default(),
        Arc::default(),
    );
    assert!(l.leases());
    let calls = || std::mem::take(&mut *asked.lock().unwrap());
    let (get, put) = (
        l.key_id_of(parts("get", "", "10.0.0.1")),
        l.key_id_of(parts("put", "", "10.0.0.1")),
    );
    let t = 1_000_000;
    // One call, then the three leased, then a call again.
    for i in 0..5 {
        assert_eq!(l.acquire_at(get, 1, t + i).admission, Admission::Admit);
    }
    assert_eq!(calls(), ["acquire-lease", "acquire-lease"]);
    // Another key asks (and its lease replaces the thread's); several permits ask
    // `acquire`, the lease untouched.
    let t = t + 10;
    l.acquire_at(put, 1, t);
    l.acquire_at(put, 2, t);
    l.acquire_at(put, 1, t);
    assert_eq!(calls(), ["acquire-lease", "acquire"]);
    // A lease lasts LEASE_NS from the plugin's clock when it gave it.
    l.acquire_at(put, 1, t + axle_spi::LEASE_NS - 1);
    assert!(calls().is_empty(), "leased");
    l.acquire_at(put, 1, t + axle_spi::LEASE_NS);
    assert_eq!(calls(), ["acquire-lease"]);
    // Another thread holds none of this one's lease.
    std::thread::scope(|s| {
        s.spawn(|| l.acquire_at(put, 1, t + axle_spi::LEASE_NS));
    });
    assert_eq!(calls(), ["acquire-lease"]);
    // The bench's own ask is always a call.
    l.ask_at(put, 1, t + axle_spi::LEASE_NS);
    assert_eq!(calls(), ["acquire"]);
}
