//! The limiter slot. Safe default: admit or reject, as the manifest's `on-error` says
//! (admit unless told otherwise: a broken limiter must not become an outage).

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::atomic::{
    AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, RwLock};

use crate::bindings::limiter as b;
use crate::native::NativeLimiter;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;

use b::axle::spi::limits::LimitKey;

pub use axle_spi::Admission;

pub use exports::LimiterKind;

/// Rejections from a failed limiter ask callers to come back after this long.
const FAIL_CLOSED_RETRY_AFTER_MS: u32 = 1000;

/// Most keys a limiter knows. Past this, a new consumer of a method shares that method's
/// overflow key (consumer `*`): memory stays bounded whatever callers send, and the
/// overflow is limited like any key — a flood never turns the limiter open.
pub const MAX_KEYS: usize = 10_000;

/// The consumer part of a method's overflow key.
const OVERFLOW: &str = "*";

/// What answers the calls: a sandboxed instance, or a native twin (`native.rs`; it cannot
/// fault, so it never needs replay).
// One per plugin (limiters keep one instance): boxing the instance would only add an
// indirection to every wasm call.
#[allow(clippy::large_enum_variant)]
enum Runner {
    Wasm(Instance<LimiterKind>),
    Native(Box<dyn NativeLimiter>),
}

struct Member {
    runner: Runner,
    /// Keys this instance has been told about (in id order), for replay.
    known: Vec<Arc<LimitKey>>,
    /// The cluster view's version this instance was last told (`cluster-limiter` only;
    /// 0: nothing yet, as for a new instance).
    cluster_seen: u64,
    /// The `now-ns` of the last `acquire` (kept across replacements of the instance).
    last_now_ns: u64,
}

/// A key's parts as a request carries them, borrowed (no allocation to look one up).
#[derive(Clone, Copy, Debug, Hash)]
pub struct KeyParts<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub consumer_app: &'a str,
    pub consumer_ip: IpAddr,
}

impl KeyParts<'_> {
    fn matches(&self, key: &LimitKey, ip: &IpAddr) -> bool {
        use axle_core::text::same;
        *ip == self.consumer_ip
            && same(&key.service, self.service)
            && same(&key.method, self.method)
            && same(&key.consumer_app, self.consumer_app)
    }
}

/// Interned keys sharing one hash: the key, its IP (compared without formatting), its id.
type Bucket = Vec<(Arc<LimitKey>, IpAddr, u32)>;

/// Numbers the limiters of the process, so one's memoised key is never taken for
/// another's ([`LAST_KEY`]).
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// A key this thread looked up, the limiter it belongs to and its id there.
struct Memo {
    serial: u64,
    key: Arc<LimitKey>,
    ip: IpAddr,
    id: u32,
}

thread_local! {
    /// The key this thread looked up last. A provider's requests come in runs from the
    /// same caller, so most lookups end here without the table's lock: a read lock
    /// writes its reader count, a line every request on every core would write
    /// (`docs/performance.md`, "Shared counts"). Ids are never reused for another key,
    /// so a memo is right for as long as its limiter lives.
    static LAST_KEY: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// A loaded limiter.
pub struct LimiterPlugin {
    pool: Pool<Member>,
    /// This limiter's number among the process's ([`SERIALS`]).
    serial: u64,
    on_error_admit: bool,
    /// Interned keys, by the hash of their parts. Read per request, written once per new
    /// key.
    ids: RwLock<rustc_hash::FxHashMap<u64, Bucket>>,
    keys: RwLock<Vec<Arc<LimitKey>>>,
    /// `keys.len()`, published after each push: an `acquire` that finds its instance up
    /// to date (nearly every one) reads this instead of taking `keys`' lock.
    key_count: AtomicUsize,
    hasher: rustc_hash::FxBuildHasher,
    key_on: crate::KeyOn,
    /// Whether and how the plugin hears how admitted requests end (the
    /// `concurrency-limiter` world's `release`), found once at load: a plain limiter is
    /// never called back.
    release: Hears,
    /// Whether and how it hears provider counts (the `cluster-limiter` world), and the
    /// view they come from.
    providers_changed: Hears,
    /// Whether and how it leases admissions (the `leasing-limiter` world's
    /// `acquire-lease`): a plain limiter is asked once per request.
    leases: Hears,
    cluster: Arc<crate::cluster::ClusterView>,
}

/// Whether a plugin hears one of the optional calls, and through what.
enum Hears {
    No,
    /// The component's export of that name.
    Export(wasmtime::component::ComponentExportIndex),
    /// The native twin's method (it said it wants the call).
    Native,
}

impl Hears {
    fn export(index: Option<wasmtime::component::ComponentExportIndex>) -> Hears {
        index.map_or(Hears::No, Hears::Export)
    }

    fn native(wants: bool) -> Hears {
        if wants {
            Hears::Native
        } else {
            Hears::No
        }
    }

    fn any(&self) -> bool {
        !matches!(self, Hears::No)
    }
}

/// The answer of [`LimiterPlugin::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Admit or reject (with retry-after).
    pub admission: Admission,
    /// `false` when the plugin failed and `on-error` decided.
    pub by_plugin: bool,
}

impl LimiterPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    pub(crate) fn new(
        instances: Vec<Instance<LimiterKind>>,
        on_error_admit: bool,
        key_on: crate::KeyOn,
        cluster: Arc<crate::cluster::ClusterView>,
    ) -> Self {
        let owner = instances[0].pool_owner();
        let component = instances[0]
            .prepared()
            .pre
            .0
            .instance_pre()
            .component()
            .clone();
        let members = instances
            .into_iter()
            .map(|inst| Member::new(Runner::Wasm(inst)))
            .collect();
        LimiterPlugin {
            release: Hears::export(component.get_export_index(None, "release")),
            providers_changed: Hears::export(component.get_export_index(None, "providers-changed")),
            leases: Hears::export(lease::export(&owner.name, &component)),
            ..LimiterPlugin::with_pool(Pool::new(members, owner), on_error_admit, key_on, cluster)
        }
    }

    /// A limiter answered by a native twin.
    pub(crate) fn native(
        twin: Box<dyn NativeLimiter>,
        owner: crate::pool::Owner,
        on_error_admit: bool,
        key_on: crate::KeyOn,
        cluster: Arc<crate::cluster::ClusterView>,
    ) -> Self {
        let release = Hears::native(twin.wants_release());
        let providers_changed = Hears::native(twin.wants_providers());
        let leases = Hears::native(twin.wants_leases());
        let member = Member::new(Runner::Native(twin));
        LimiterPlugin {
            release,
            providers_changed,
            leases,
            ..LimiterPlugin::with_pool(
                Pool::new(vec![member], owner),
                on_error_admit,
                key_on,
                cluster,
            )
        }
    }

    fn with_pool(
        pool: Pool<Member>,
        on_error_admit: bool,
        key_on: crate::KeyOn,
        cluster: Arc<crate::cluster::ClusterView>,
    ) -> Self {
        LimiterPlugin {
            pool,
            serial: SERIALS.fetch_add(1, Relaxed),
            on_error_admit,
            ids: RwLock::new(rustc_hash::FxHashMap::default()),
            keys: RwLock::new(Vec::new()),
            key_count: AtomicUsize::new(0),
            hasher: rustc_hash::FxBuildHasher,
            key_on,
            release: Hears::No,
            providers_changed: Hears::No,
            leases: Hears::No,
            cluster,
        }
    }

    /// Whether the plugin wants to hear how admitted requests end (it exports `release`).
    pub fn wants_release(&self) -> bool {
        self.release.any()
    }

    /// Whether the plugin leases admissions (it exports `acquire-lease`).
    pub fn leases(&self) -> bool {
        self.leases.any()
    }

    /// Tells the plugin a request admitted under `key` ended (`latency_ns` after its
    /// admission; `dropped` when it did not end with the handler's answer in time). A
    /// plain limiter is not called. A fault here only costs the plugin this sample (and
    /// its instance, replaced like any faulted one): the request has already ended.
    pub fn release(&self, key: u32, permits: u32, latency_ns: u64, dropped: bool) {
        if !self.release.any() {
            return;
        }
        let _ = self.pool.with(|member| {
            self.catch_up(member)?;
            match (&mut member.runner, &self.release) {
                (Runner::Wasm(inst), Hears::Export(_)) => {
                    inst.call("release", |b, s| match &b.release {
                        Some(f) => f.call(s, (key, permits, latency_ns, dropped)),
                        None => Ok(()),
                    })
                }
                (Runner::Native(twin), Hears::Native) => {
                    twin.release(key, permits, latency_ns, dropped);
                    Ok(())
                }
                _ => Ok(()),
            }
        });
    }

    /// The id of the key made of `parts` (keeping only the identities the limiter keys
    /// on), interning it on first sight, or the method's overflow key once
    /// [`MAX_KEYS`] are known.
    pub fn key_id_of(&self, mut parts: KeyParts<'_>) -> u32 {
        if !self.key_on.consumer_app {
            parts.consumer_app = "";
        }
        if !self.key_on.consumer_ip {
            parts.consumer_ip = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
        }
        let memoised = LAST_KEY.with_borrow(|last| {
            last.as_ref()
                .filter(|m| m.serial == self.serial && parts.matches(&m.key, &m.ip))
                .map(|m| m.id)
        });
        if let Some(id) = memoised {
            return id;
        }
        match self.intern(parts, false) {
            Some((id, key)) => {
                let memo = Memo {
                    serial: self.serial,
                    key,
                    ip: parts.consumer_ip,
                    id,
                };
                LAST_KEY.set(Some(memo));
                id
            }
            // Not memoised: the memo holds the key asked for, and this is another.
            None => self
                .intern(
                    KeyParts {
                        consumer_app: OVERFLOW,
                        consumer_ip: IpAddr::V4(std::net::Ipv4Addr::BROADCAST),
                        ..parts
                    },
                    true,
                )
                .map_or(0, |(id, _)| id),
        }
    }

    /// The key's id and the key itself; `None`: the key is new and the table is full
    /// (and `overflow` is false).
    fn intern(&self, parts: KeyParts<'_>, overflow: bool) -> Option<(u32, Arc<LimitKey>)> {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(parts);
        let find = |bucket: &Bucket| {
            bucket
                .iter()
                .find(|(k, ip, _)| parts.matches(k, ip))
                .map(|(k, _, id)| (*id, k.clone()))
        };
        if let Some(found) = self
            .ids
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&hash)
            .and_then(find)
        {
            return Some(found);
        }
        let mut ids = self.ids.write().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = ids.get(&hash).and_then(find) {
            return Some(found);
        }
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        if keys.len() >= MAX_KEYS && !overflow {
            return None;
        }
        let bucket = ids.entry(hash).or_default();
        let key = Arc::new(LimitKey {
            service: parts.service.to_string(),
            method: parts.method.to_string(),
            consumer_app: parts.consumer_app.to_string(),
            consumer_ip: if overflow {
                OVERFLOW.to_string()
            } else {
                parts.consumer_ip.to_string()
            },
        });
        let id = keys.len() as u32;
        keys.push(key.clone());
        self.key_count.store(keys.len(), Release);
        bucket.push((key.clone(), parts.consumer_ip, id));
        Some((id, key))
    }

    /// How many keys the limiter knows (at most [`MAX_KEYS`] plus one overflow key per
    /// method).
    pub fn key_count(&self) -> usize {
        self.key_count.load(Acquire)
    }

    /// The id of `key` (its IP as text; an unparsable IP counts as unspecified).
    pub fn key_id(&self, key: &axle_spi::LimitKey) -> u32 {
        self.key_id_of(KeyParts {
            service: &key.service,
            method: &key.method,
            consumer_app: &key.consumer_app,
            consumer_ip: key
                .consumer_ip
                .parse()
                .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        })
    }

    /// Hot-swap handoff, the running side: what the plugin wants its next version to
    /// know (its optional `export-state`; `None` if it has none). One instance answers:
    /// limiters keep one.
    pub fn export_state(&self) -> Option<Vec<u8>> {
        self.pool
            .with(|member| {
                self.catch_up(member).ok()?;
                match &mut member.runner {
                    Runner::Wasm(inst) => inst
                        .call_optional::<(), (Vec<u8>,)>("export-state", ())
                        .map(|(bytes,)| bytes),
                    Runner::Native(twin) => twin.export_state(),
                }
            })
            .ok()
            .flatten()
    }

    /// Hot-swap handoff, the new side: hands `state` to every instance's optional
    /// `import-state`, before any key is defined. Returns whether the plugin took it.
    pub fn import_state(&self, state: &[u8]) -> bool {
        let mut took = false;
        self.pool.each(|member| {
            took |= match &mut member.runner {
                Runner::Wasm(inst) => inst
                    .call_optional::<(&[u8],), ()>("import-state", (state,))
                    .is_some(),
                Runner::Native(twin) => twin.import_state(state),
            };
        });
        took
    }

    /// Asks to admit `permits` under `key` (interned by [`LimiterPlugin::key_id`]), now.
    pub fn acquire(&self, key: u32, permits: u32) -> Admitted {
        self.acquire_at(key, permits, axle_core::now_ns())
    }

    /// [`LimiterPlugin::acquire`] at `at_ns` on the kernel clock, a reading the caller
    /// already has (the server's: when the request's frame was read), so the call reads
    /// no clock of its own. The plugin's `now-ns` never goes back from one call to the
    /// next: a reading older than the last call's (taken before another caller got the
    /// instance) is passed as the last call's.
    ///
    /// A `leasing-limiter` is asked one permit at a time, and a lease it gives admits the
    /// thread's next requests under the same key without a call (`lease.rs`).
    pub fn acquire_at(&self, key: u32, permits: u32, at_ns: u64) -> Admitted {
        if permits != 1 || !self.leases.any() {
            return self.ask_at(key, permits, at_ns);
        }
        if lease::take(self.serial, key, at_ns) {
            return Admitted {
                admission: Admission::Admit,
                by_plugin: true,
            };
        }
        let answer = self.ask(at_ns, |member, now_ns| {
            match (&mut member.runner, &self.leases) {
                (Runner::Wasm(inst), Hears::Export(_)) => inst
                    .call("acquire-lease", |b, s| match &b.acquire_lease {
                        Some(f) => f.call(s, (key, now_ns)).map(|(answer,)| answer),
                        None => Err(wasmtime::format_err!(
                            "the component exports no `acquire-lease` of the contract's type"
                        )),
                    })
                    .map(|answer| {
                        let admission = crate::convert::admission(answer as u32);
                        (admission, (answer >> 32) as u32)
                    }),
                (Runner::Native(twin), _) => Ok(twin.acquire_lease(key, now_ns)),
                (Runner::Wasm(inst), _) => inst
                    .call("acquire", |b, s| b.world.call_acquire(s, key, 1, now_ns))
                    .map(|answer| (crate::convert::admission(answer), 0)),
            }
        });
        self.admitted(answer.map(|((admission, lease), now_ns)| {
            if admission == Admission::Admit && lease > 0 {
                lease::hold(self.serial, key, lease, now_ns);
            }
            admission
        }))
    }

    /// Asks the plugin's `acquire` for `permits` under `key` at `at_ns`, whatever this
    /// thread holds leased: what [`LimiterPlugin::acquire_at`] does for a plain limiter,
    /// and how `axle bench plugins` times the call itself.
    pub fn ask_at(&self, key: u32, permits: u32, at_ns: u64) -> Admitted {
        let answer = self.ask(at_ns, |member, now_ns| match &mut member.runner {
            Runner::Wasm(inst) => inst
                .call("acquire", |b, s| {
                    b.world.call_acquire(s, key, permits, now_ns)
                })
                .map(crate::convert::admission),
            Runner::Native(twin) => Ok(twin.acquire(key, permits, now_ns)),
        });
        self.admitted(answer.map(|(admission, _)| admission))
    }

    /// Runs `call` on the instance, brought up to date, with the plugin's `now-ns` for
    /// `at_ns`; the answer comes back with that `now-ns`.
    fn ask<R>(
        &self,
        at_ns: u64,
        call: impl FnOnce(&mut Member, u64) -> Result<R, Fault>,
    ) -> Result<(R, u64), Fault> {
        self.pool
            .with(|member| {
                self.catch_up(member)?;
                let now_ns = at_ns.max(member.last_now_ns);
                member.last_now_ns = now_ns;
                call(member, now_ns).map(|answer| (answer, now_ns))
            })
            .and_then(|answer| answer)
    }

    /// The plugin's admission, or `on-error`'s when it failed.
    fn admitted(&self, answer: Result<Admission, Fault>) -> Admitted {
        match answer {
            Ok(admission) => Admitted {
                admission,
                by_plugin: true,
            },
            Err(_) => Admitted {
                admission: if self.on_error_admit {
                    Admission::Admit
                } else {
                    Admission::Reject {
                        retry_after_ms: FAIL_CLOSED_RETRY_AFTER_MS,
                    }
                },
                by_plugin: false,
            },
        }
    }

    /// Brings an instance up to date: a new instance hears every key again, a live one
    /// only the keys interned since it last heard; a `cluster-limiter` also the provider
    /// counts, when they changed since it last heard (one atomic load otherwise).
    fn catch_up(&self, member: &mut Member) -> Result<(), Fault> {
        if let Runner::Wasm(inst) = &mut member.runner {
            if !inst.is_live() {
                member.cluster_seen = 0;
                let known = member.known.clone();
                inst.ensure(0, move |bindings, store| {
                    for (id, key) in known.iter().enumerate() {
                        bindings
                            .world
                            .call_key_defined(&mut *store, id as u32, key)?;
                    }
                    Ok(())
                })?;
            }
        }
        if member.known.len() < self.key_count.load(Acquire) {
            let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
            while member.known.len() < keys.len() {
                let id = member.known.len();
                let key = keys[id].clone();
                match &mut member.runner {
                    Runner::Wasm(inst) => inst.call("key-defined", |b, s| {
                        b.world.call_key_defined(s, id as u32, &key)
                    })?,
                    Runner::Native(twin) => twin.key_defined(id as u32, spi_key(&key)),
                }
                member.known.push(key);
            }
        }
        if self.providers_changed.any() && self.cluster.version() != member.cluster_seen {
            let (version, counts) = self.cluster.snapshot();
            for (service, providers) in &counts {
                match (&mut member.runner, &self.providers_changed) {
                    (Runner::Wasm(inst), Hears::Export(index)) => inst
                        .call_export::<(&str, u32), ()>(
                            "providers-changed",
                            index,
                            (service.as_str(), *providers),
                        )?,
                    (Runner::Native(twin), Hears::Native) => {
                        twin.providers_changed(service, *providers)
                    }
                    _ => {}
                }
            }
            member.cluster_seen = version;
        }
        Ok(())
    }
}

impl Member {
    fn new(runner: Runner) -> Member {
        Member {
            runner,
            known: Vec::new(),
            cluster_seen: 0,
            last_now_ns: 0,
        }
    }
}

/// A key as a native twin takes it.
fn spi_key(key: &LimitKey) -> axle_spi::LimitKey {
    axle_spi::LimitKey {
        service: key.service.clone(),
        method: key.method.clone(),
        consumer_app: key.consumer_app.clone(),
        consumer_ip: key.consumer_ip.clone(),
    }
}

mod exports;
mod lease;

#[cfg(test)]
mod tests;
