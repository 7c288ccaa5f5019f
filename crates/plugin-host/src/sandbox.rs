//! One sandboxed plugin instance: a `Store` with its limits, the kind's typed bindings,
//! and the rules that keep a misbehaving guest from reaching the caller.
//!
//! - Every call gets an epoch deadline (the plugin's `timeout-ms`).
//! - Every store has a memory limit (the plugin's `memory-mib`).
//! - A call that traps, times out or runs out of memory kills the instance (after a trap
//!   wasmtime refuses to enter it again); the next use makes a fresh one from the shared
//!   `InstancePre`, re-runs `init` and lets the kind replay what it had pushed (tables,
//!   sets, keys). Until then the caller gets the kind's safe default.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store, Trap};

use super::bindings::wit::ConfigValue;
use super::engine::deadline_ticks;
use super::host_state::{HostState, Owner};
use super::stats::{Fault, PluginStats};
use crate::PluginSpec;
use axle_facts::FactsTable;

/// After an instance cannot be made, wait this long before trying again (calls meanwhile
/// get the safe default without paying for a doomed instantiation).
const RETRY_INSTANTIATE_AFTER: Duration = Duration::from_millis(100);

/// What distinguishes the kinds to the sandbox: how to check a component against the
/// world, instantiate it and call its `init`.
pub trait Kind: 'static {
    /// Export indices resolved once per component (validates the world).
    type Pre: Clone + Send + Sync + 'static;
    /// The typed exports of one instance.
    type Bindings: Send + 'static;

    /// Checks that the component implements this kind's world. `component` is its bytes,
    /// for what wasmtime does not tell (`post_return.rs`).
    fn pre(pre: InstancePre<HostState>, component: &[u8]) -> wasmtime::Result<Self::Pre>;
    /// Instantiates: the typed bindings, and the instance itself (for the optional
    /// exports no world requires, looked up by name).
    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)>;
    /// Calls the plugin's `init` with its config (`&Vec` because that is what the
    /// generated bindings take).
    #[allow(clippy::ptr_arg)]
    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>>;
}

/// The export at `index`, if the component has it, typed as `TypedFunc<P, R>`: for a
/// kind's optional exports, typed once per instance (`Kind::instantiate`) so that no call
/// looks one up and checks its type again.
pub fn typed_export<P, R>(
    instance: &wasmtime::component::Instance,
    store: &mut Store<HostState>,
    index: &Option<wasmtime::component::ComponentExportIndex>,
) -> wasmtime::Result<Option<wasmtime::component::TypedFunc<P, R>>>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
    R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
{
    index
        .as_ref()
        .map(|index| instance.get_typed_func(&mut *store, index))
        .transpose()
}

/// Everything the instances of one plugin share.
pub struct Prepared<K: Kind> {
    pub engine: Engine,
    /// The engine's ticks, for a caller that times a hold of several calls as cheaply
    /// as a deadline is kept.
    pub ticks: crate::engine::Ticks,
    pub spec: PluginSpec,
    pub name: Arc<str>,
    pub pre: K::Pre,
    pub config: Vec<(String, ConfigValue)>,
    pub facts: Arc<FactsTable>,
    pub stats: Arc<PluginStats>,
}

impl<K: Kind> Prepared<K> {
    /// A fresh store, with the deadline set BEFORE instantiation: the WASI adapter runs
    /// code at start-up and would trap on a zero deadline.
    fn store(&self) -> Store<HostState> {
        let mut store = Store::new(
            &self.engine,
            HostState::new(
                Owner {
                    plugin: self.name.clone(),
                    kind: self.spec.kind.as_str(),
                    stats: self.stats.clone(),
                },
                self.facts.clone(),
                self.spec.memory_bytes,
            ),
        );
        store.limiter(|s| s as &mut dyn wasmtime::ResourceLimiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(self.init_timeout_ms()));
        store
    }

    fn init_timeout_ms(&self) -> u64 {
        crate::defaults::INIT_TIMEOUT_MS.max(self.spec.timeout_ms)
    }

    /// A new instance, initialised with the plugin's config.
    pub fn instantiate(&self) -> Result<Live<K>, Fault> {
        let mut store = self.store();
        let init_ms = self.init_timeout_ms();
        let (bindings, instance) =
            K::instantiate(&self.pre, &mut store).map_err(|e| classify(e, &store, init_ms))?;
        match K::init(&bindings, &mut store, &self.config) {
            Ok(Ok(())) => Ok(Live {
                store,
                bindings,
                instance,
            }),
            Ok(Err(msg)) => Err(Fault::Unavailable(format!(
                "init rejected its config: {msg}"
            ))),
            Err(e) => Err(classify(e, &store, init_ms)),
        }
    }
}

/// A live instance.
pub struct Live<K: Kind> {
    pub store: Store<HostState>,
    pub bindings: K::Bindings,
    pub instance: wasmtime::component::Instance,
}

/// A replacement being made off the request path: the state generation it was made
/// for, and where it will arrive.
type Coming<K> = (u64, Receiver<Result<Live<K>, Fault>>);

/// One instance of a plugin: live, or being replaced.
pub struct Instance<K: Kind> {
    prepared: Arc<Prepared<K>>,
    live: Option<Live<K>>,
    retry_at: Option<Instant>,
    coming: Option<Coming<K>>,
    /// The instance a fault killed, until the job making its replacement frees it.
    dead: Option<Live<K>>,
}

impl<K: Kind> Instance<K> {
    /// A slot holding an already made instance.
    pub fn new(prepared: Arc<Prepared<K>>, live: Live<K>) -> Self {
        Instance {
            prepared,
            live: Some(live),
            retry_at: None,
            coming: None,
            dead: None,
        }
    }

    /// Whether an instance is live (no replay needed).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// What the pool of this plugin's instances needs to know of it.
    pub fn pool_owner(&self) -> crate::pool::Owner {
        crate::pool::Owner {
            name: self.prepared.name.clone(),
            stats: self.prepared.stats.clone(),
            timeout_ms: self.prepared.spec.timeout_ms,
        }
    }

    /// The plugin's shared parts.
    pub fn prepared(&self) -> &Arc<Prepared<K>> {
        &self.prepared
    }

    /// Makes sure an instance is live, without making the caller wait for one: a dead
    /// instance is replaced off the request path (`rebuild.rs`) and until then this
    /// answers `Replacing` (the caller gives the safe default). The replacement gets
    /// `replay` — the kind pushing the state the old one had (tables, sets, keys) — under
    /// the start-up deadline. `generation` names that state: a replacement made for an
    /// older generation (the table changed meanwhile) is discarded and made again. Once a
    /// plugin has been replaced, a spare is kept ready, so its next death is replaced at
    /// once, without a call answered by the safe default.
    pub fn ensure<R>(&mut self, generation: u64, replay: R) -> Result<(), Fault>
    where
        R: FnOnce(&K::Bindings, &mut Store<HostState>) -> wasmtime::Result<()>
            + Clone
            + Send
            + 'static,
    {
        self.ensure_within(generation, Duration::ZERO, replay)
    }

    /// [`Instance::ensure`], but waiting up to `wait` for the replacement instead of
    /// answering `Replacing` at once: for a kind whose safe default is an error (a
    /// serializer's), a short wait on the rebuild thread fails fewer calls than the safe
    /// default would. The wait is bounded like any wait on a plugin (its `timeout-ms`).
    pub fn ensure_within<R>(
        &mut self,
        generation: u64,
        wait: Duration,
        replay: R,
    ) -> Result<(), Fault>
    where
        R: FnOnce(&K::Bindings, &mut Store<HostState>) -> wasmtime::Result<()>
            + Clone
            + Send
            + 'static,
    {
        if self.live.is_some() {
            return Ok(());
        }
        // Twice at most: a spare made for a state that has moved on is discarded, and
        // one for the current state made.
        for _ in 0..2 {
            if self.coming.is_none() {
                if self.retry_at.is_some_and(|t| Instant::now() < t) {
                    let fault = Fault::Unavailable("waiting to retry instantiation".into());
                    self.fault("instantiate", &fault);
                    return Err(fault);
                }
                // A caller about to wait for it needs it started now, lock or not.
                let now = !wait.is_zero();
                self.coming = Some(self.make_replacement(generation, now, replay.clone()));
            }
            let Some((made_for, rx)) = &self.coming else {
                break;
            };
            let made_for = *made_for;
            let got = if wait.is_zero() {
                rx.try_recv().map_err(|e| e == TryRecvError::Disconnected)
            } else {
                rx.recv_timeout(wait)
                    .map_err(|e| e == RecvTimeoutError::Disconnected)
            };
            match got {
                Ok(Ok(live)) if made_for == generation => {
                    self.live = Some(live);
                    self.retry_at = None;
                    // Logged like faults: the 1st, 2nd, 4th, ... (a plugin faulting on
                    // 1% of a busy path's calls is replaced hundreds of times a second).
                    let count = self.prepared.stats.replaced();
                    if count.is_power_of_two() {
                        tracing::info!(plugin = %self.prepared.name, count, "plugin instance replaced");
                    }
                    // A plugin that faulted once keeps a spare from now on: its next
                    // fault then costs the calls after it nothing.
                    self.coming = Some(self.make_replacement(generation, false, replay));
                    return Ok(());
                }
                // Made for a state that has moved on, or its thread went away: again.
                Ok(Ok(_)) | Err(true) => self.coming = None,
                Ok(Err(fault)) => {
                    self.coming = None;
                    self.retry_at = Some(Instant::now() + RETRY_INSTANTIATE_AFTER);
                    let fault = Fault::Unavailable(format!("cannot replace the instance: {fault}"));
                    self.fault("instantiate", &fault);
                    return Err(fault);
                }
                // Not made yet. Counted, not logged: the fault that killed the instance was.
                Err(false) => break,
            }
        }
        self.prepared.stats.fault(&Fault::Replacing);
        Err(Fault::Replacing)
    }

    /// Starts making an instance for state `generation` on a rebuild thread, which also
    /// frees the dead one, if any; `now`: even from under the pool's lock (the caller
    /// will wait for it), otherwise once the lock is released (`rebuild.rs`).
    fn make_replacement(
        &mut self,
        generation: u64,
        now: bool,
        replay: impl FnOnce(&K::Bindings, &mut Store<HostState>) -> wasmtime::Result<()>
            + Send
            + 'static,
    ) -> Coming<K> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let p = self.prepared.clone();
        let dead = self.dead.take();
        let job = move || {
            drop(dead);
            // Replay runs under the start-up deadline: pushing a large table is start-up
            // work.
            let made = p.instantiate().and_then(|mut live| {
                replay(&live.bindings, &mut live.store)
                    .map_err(|e| classify(e, &live.store, p.init_timeout_ms()))?;
                Ok(live)
            });
            let _ = tx.send(made);
        };
        if now {
            crate::rebuild::spawn_now(job);
        } else {
            crate::rebuild::spawn(job);
        }
        (generation, rx)
    }

    /// Calls into the live instance (which [`Instance::ensure`] made sure of). A fault
    /// discards the instance, is logged and counted, and is returned so the caller can
    /// answer with its kind's safe default.
    pub fn call<R>(
        &mut self,
        what: &str,
        f: impl FnOnce(&K::Bindings, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, Fault> {
        let p = &self.prepared;
        p.stats.call();
        // At debug level only: otherwise one level check, nothing evaluated or stored.
        let _span = tracing::debug_span!("plugin", plugin = %p.name, call = what).entered();
        let Some(live) = self.live.as_mut() else {
            let fault = Fault::Unavailable("no live instance".into());
            self.fault(what, &fault);
            return Err(fault);
        };
        live.store
            .set_epoch_deadline(deadline_ticks(p.spec.timeout_ms));
        // Timed only when the manifest gives a slow-call budget: two clock reads are a
        // noticeable share of a call that costs ~0.2 µs.
        let started = (p.spec.slow_call_us > 0).then(Instant::now);
        match f(&live.bindings, &mut live.store) {
            Ok(r) => {
                let took = started.map(|t| t.elapsed());
                if let Some(took) = took {
                    p.stats.took(took.as_nanos() as u64);
                }
                match took {
                    Some(took) if took.as_micros() as u64 > p.spec.slow_call_us => {
                        let count = p.stats.slow(p.spec.quarantine_slow);
                        if count.is_power_of_two() {
                            tracing::warn!(
                                plugin = %p.name,
                                call = what,
                                took_us = took.as_micros() as u64,
                                budget_us = p.spec.slow_call_us,
                                count,
                                "plugin call slower than its budget"
                            );
                        }
                    }
                    _ => p.stats.succeeded(),
                }
                Ok(r)
            }
            Err(e) => {
                let fault = classify(e, &live.store, p.spec.timeout_ms);
                // Dropped off the request path, by the job that makes its replacement:
                // freeing a store unmaps its memories, and the TLB shootdown that
                // follows would be paid with the pool's lock held.
                self.dead = self.live.take();
                self.fault(what, &fault);
                Err(fault)
            }
        }
    }

    /// Calls an optional export no world requires (`export-state`, `import-state`):
    /// `None` if the component does not export it, or if there is no live instance, or
    /// if the call faulted (then counted and logged like any fault).
    pub fn call_optional<P, R>(&mut self, name: &str, params: P) -> Option<R>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + Send + Sync,
    {
        let live = self.live.as_mut()?;
        let func = live
            .instance
            .get_typed_func::<P, R>(&mut live.store, name)
            .ok()?;
        self.call(name, |_, store| {
            let r = func.call(&mut *store, params)?;
            Ok(r)
        })
        .ok()
    }

    /// Calls an optional export whose index was found once per component
    /// (`Component::get_export_index`), for one on the request path: no lookup by name. A fault is handled like any
    /// [`Instance::call`]'s.
    pub fn call_export<P, R>(
        &mut self,
        what: &str,
        index: &wasmtime::component::ComponentExportIndex,
        params: P,
    ) -> Result<R, Fault>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + Send + Sync,
    {
        let Some(live) = self.live.as_mut() else {
            let fault = Fault::Unavailable("no live instance".into());
            self.fault(what, &fault);
            return Err(fault);
        };
        let func = live.instance.get_typed_func::<P, R>(&mut live.store, index);
        self.call(what, |_, store| func?.call(&mut *store, params))
    }

    /// Records a fault found by the kind (e.g. an invalid answer) or by [`Instance::call`].
    /// Every fault is counted; the log gets the 1st, 2nd, 4th, 8th, ... of each cause, so
    /// a plugin that fails on every call cannot flood it.
    pub fn fault(&self, what: &str, fault: &Fault) {
        let p = &self.prepared;
        let count = p.stats.fault(fault);
        if count.is_power_of_two() {
            tracing::warn!(
                plugin = %p.name,
                kind = %p.spec.kind,
                call = what,
                count,
                "plugin fault, answering with the safe default: {fault}"
            );
        }
    }
}

/// Sorts a wasmtime error into a [`Fault`].
pub(crate) fn classify(err: wasmtime::Error, store: &Store<HostState>, timeout_ms: u64) -> Fault {
    if store.data().memory_denied {
        return Fault::Memory;
    }
    if store.data().blocked {
        return Fault::Blocked;
    }
    if let Some(full) = err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        return Fault::Unavailable(format!(
            "{full}: the plugin instance pool is full (raise {})",
            super::engine::SLOTS_ENV
        ));
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        // How the SDK ends a panicking plugin (`sdk/src/wasm/panic.rs`): cheaper for
        // the kernel than the trap a panic is otherwise.
        return Fault::Trap(format!(
            "exited with status {} (a Rust plugin's panic ends so; its message is in the \
             log, target `plugin`)",
            exit.0
        ));
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Fault::Timeout(timeout_ms),
        Some(trap) => Fault::Trap(trap.to_string()),
        None => Fault::Trap(format!("{err:#}")),
    }
}
