//! The selector slot (BALANCE = SELECT). Safe default: a uniform random pick among the
//! set's members, made natively.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use axle_facts::FactsTable;
use axle_spi::{LoadMeasure, Pair, NO_PICK};

use crate::bindings::two_choice_selector::axle::spi::balancing as wit_balancing;
use crate::bindings::wit;
use crate::native::NativeSelector;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;

mod exports;
mod runs;
mod sets;
pub use exports::SelectorKind;
use sets::{Membership, Run, SetLoads, SetMembers};

/// Outcomes are fed back in batches of this many (`docs/architecture.md`, "Budgets on the hot path").
pub const FEEDBACK_BATCH: usize = 64;

/// What answers the calls: a sandboxed instance, or a native twin (`native.rs`; it
/// cannot fault, so it never needs replay).
// One per pool member, a handful per plugin: boxing the instance would only add an
// indirection to every wasm call.
#[allow(clippy::large_enum_variant)]
enum Runner {
    Wasm(Instance<SelectorKind>),
    Native(Box<dyn NativeSelector>),
}

/// One instance with everything pushed to it, so a replacement can be brought up to date.
struct Member {
    runner: Runner,
    table: Option<Arc<wit::EndpointTable>>,
    /// Bumped whenever the state a replacement must replay changes.
    generation: u64,
    /// By kernel id; Fx-hashed: looked up on every pick, where SipHash would cost more
    /// than the rest of the kernel's share of the call.
    sets: FxHashMap<u32, Arc<SetMembers>>,
    pending: Vec<axle_spi::Outcome>,
    /// `pending` in the component's types, reused batch after batch.
    wire: Vec<wit::Outcome>,
    stats: Arc<crate::PluginStats>,
}

impl Member {
    fn new(runner: Runner, stats: Arc<crate::PluginStats>) -> Member {
        Member {
            runner,
            table: None,
            sets: FxHashMap::default(),
            generation: 0,
            pending: Vec::with_capacity(FEEDBACK_BATCH),
            wire: Vec::with_capacity(FEEDBACK_BATCH),
            stats,
        }
    }

    fn ensure(&mut self) -> Result<(), Fault> {
        let inst = match &mut self.runner {
            Runner::Wasm(inst) if !inst.is_live() => inst,
            _ => return Ok(()),
        };
        let table = self.table.clone();
        let sets: Vec<_> = self.sets.iter().map(|(k, v)| (*k, v.clone())).collect();
        inst.ensure(self.generation, move |bindings, store| {
            if let Some(table) = &table {
                bindings.world.call_endpoints_changed(&mut *store, table)?;
            }
            for (id, members) in &sets {
                bindings
                    .world
                    .call_define_set(&mut *store, wire_id(*id), &members.ids)?;
            }
            Ok(())
        })
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() && self.ensure().is_ok() {
            match &mut self.runner {
                Runner::Wasm(inst) => {
                    self.wire.clear();
                    self.wire
                        .extend(self.pending.iter().map(crate::convert::outcome));
                    let wire = self.wire.as_slice();
                    let _ = inst.call("feedback", |b, s| match &b.feedback {
                        Some(f) => f.typed::<(&[wit::Outcome],), ()>(&*s)?.call(s, (wire,)),
                        None => Err(wasmtime::format_err!("the component exports no `feedback`")),
                    });
                }
                Runner::Native(twin) => twin.feedback(&self.pending),
            }
        }
        self.pending.clear();
    }

    fn endpoints_changed(&mut self, table: &axle_spi::EndpointTable, wire: &wit::EndpointTable) {
        match &mut self.runner {
            // A fault here already discarded the instance; its replacement gets the table
            // by replay.
            Runner::Wasm(inst) => {
                let _ = inst.call("endpoints-changed", |b, s| {
                    b.world.call_endpoints_changed(s, wire)
                });
            }
            Runner::Native(twin) => twin.endpoints_changed(table.clone()),
        }
    }

    fn define_set(&mut self, id: u32, members: &[u32]) {
        match &mut self.runner {
            Runner::Wasm(inst) => {
                let _ = inst.call("define-set", |b, s| {
                    b.world.call_define_set(s, wire_id(id), members)
                });
            }
            Runner::Native(twin) => twin.define_set(wire_id(id), members.to_vec()),
        }
    }

    /// Picks from set `id`, checked against the kernel's copy of it: the plugin's pick, or
    /// with `two`, the lighter of the plugin's two candidates.
    fn select(&mut self, id: u32, hash_key: u64, two: Option<&LoadMeasure>) -> Option<Selection> {
        let live = self.ensure();
        // The set is borrowed beside the runner (disjoint fields): one lookup per pick and
        // no `Arc` clone.
        let Member {
            runner,
            sets,
            stats,
            ..
        } = self;
        let set = sets.get(&id).filter(|set| !set.ids.is_empty())?;
        let pick = live.and_then(|()| match two {
            Some(_) => runner.select_two(id, hash_key),
            None => runner.select(id, hash_key),
        });
        let outside = |endpoint: u32| {
            (!set.members.contains(endpoint))
                .then(|| Fault::Invalid(format!("endpoint {endpoint} is not in set {id}")))
        };
        let endpoint = match pick {
            Ok(Pair::None) | Err(_) => return Some(random_pick(&set.ids)),
            Ok(Pair::One(endpoint)) => outside(endpoint).map_or(Ok(endpoint), Err),
            Ok(Pair::Two(first, second)) => match outside(first).or_else(|| outside(second)) {
                Some(fault) => Err(fault),
                // A pair comes back only from `select_two`, and its sets have loads.
                None => Ok(match (two, &set.loads) {
                    (Some(measure), Some(loads)) => loads.lighter(measure, first, second),
                    _ => first,
                }),
            },
        };
        match endpoint {
            Ok(endpoint) => Some(Selection::by_plugin(endpoint)),
            Err(fault) => {
                let what = if two.is_some() {
                    "select-two"
                } else {
                    "select"
                };
                runner.fault(stats, what, &fault);
                Some(random_pick(&set.ids))
            }
        }
    }
}

impl Runner {
    fn select(&mut self, id: u32, hash_key: u64) -> Result<Pair, Fault> {
        let pick = match self {
            Runner::Wasm(inst) => inst.call("select", |b, s| {
                b.world.call_select(s, wire_id(id), hash_key)
            })?,
            Runner::Native(twin) => twin.select(wire_id(id), hash_key).unwrap_or(NO_PICK),
        };
        Ok(if pick == NO_PICK {
            Pair::None
        } else {
            Pair::One(pick)
        })
    }

    fn select_two(&mut self, id: u32, hash_key: u64) -> Result<Pair, Fault> {
        let packed = match self {
            Runner::Wasm(inst) => inst.call("select-two", |b, s| match &b.select_two {
                Some(f) => f.call(s, (wire_id(id), hash_key)).map(|(packed,)| packed),
                None => Err(wasmtime::format_err!(
                    "the component exports no `select-two`"
                )),
            })?,
            Runner::Native(twin) => twin.select_two(wire_id(id), hash_key),
        };
        Ok(axle_spi::unpack_pair(packed))
    }

    fn fault(&self, stats: &crate::PluginStats, what: &str, fault: &Fault) {
        match self {
            Runner::Wasm(inst) => inst.fault(what, fault),
            Runner::Native(_) => {
                stats.fault(fault);
            }
        }
    }
}

/// Set ids a plugin sees: below 65,536, the bound every guest runtime (Rust, C, Python,
/// JS) indexes sets by.
const WIRE_IDS: u32 = 1 << 16;

/// The id a plugin knows set `id` by. Kernel ids are never reused, so a call holding the
/// id of a set forgotten with an old table finds nothing rather than another set; the
/// plugin sees them modulo [`WIRE_IDS`], and since sets are forgotten with every table,
/// two live sets share a wire id only past 65,536 sets in one table's life. Then the
/// newer definition wins in the plugin, and a pick outside the kernel's set is caught as
/// an invalid answer (counted) and replaced by the random fallback.
fn wire_id(id: u32) -> u32 {
    id % WIRE_IDS
}

/// The answer of [`SelectorPlugin::select`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The chosen endpoint (always a member of the set).
    pub endpoint: u32,
    /// `false` when the kernel's random fallback chose (plugin fault or `none`).
    pub by_plugin: bool,
}

impl Selection {
    /// A pick the plugin made.
    fn by_plugin(endpoint: u32) -> Self {
        Selection {
            endpoint,
            by_plugin: true,
        }
    }
}

/// Distinguishes selector plugins in the per-thread feedback buffers.
static NEXT_SELECTOR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// Outcomes waiting for delivery, per selector plugin, on this thread: a call adds to
    /// its thread's buffer without taking the plugin's lock; a full buffer is delivered in
    /// one `feedback` call.
    static FEEDBACK: std::cell::RefCell<FxHashMap<u64, Vec<axle_spi::Outcome>>> =
        std::cell::RefCell::new(FxHashMap::default());
}

/// A loaded selector.
pub struct SelectorPlugin {
    id: u64,
    pool: Pool<Member>,
    /// Set when the plugin declared a load measure (`two-choice-selector`): every pick is
    /// then `select-two`, and the kernel keeps the lighter candidate.
    measure: Option<LoadMeasure>,
    /// Set when the plugin exports `feedback` (`learning-selector`); outcomes are kept
    /// and delivered only then.
    hears: bool,
    /// Set when the plugin answers runs of picks (`run-selector`'s `select-run`).
    runs: bool,
    /// Set when a two-choice selector answers runs of pairs
    /// (`two-choice-run-selector`'s `select-two-run`).
    pairs: bool,
    /// Where a two-choice selector's sets find their members' facts.
    facts: Arc<FactsTable>,
    /// Sets already defined, by their members (as given), so the same candidates always
    /// name the same set. Cleared with the table.
    interned: std::sync::Mutex<HashMap<Vec<u32>, u32>>,
    /// Set ids are never reused, so a call holding the id of a set forgotten with an old
    /// table finds no set (and re-routes) rather than someone else's.
    next_set: std::sync::atomic::AtomicU32,
}

impl SelectorPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    /// Asks the first instance of a two-choice selector for its measure (every instance
    /// runs the same code and config); one that cannot say does not load.
    pub(crate) fn new(
        mut instances: Vec<Instance<SelectorKind>>,
        facts: Arc<FactsTable>,
    ) -> Result<Self, Fault> {
        let first = &mut instances[0];
        let measure = match first
            .prepared()
            .pre
            .0
            .instance_pre()
            .component()
            .get_export_index(None, "measure")
        {
            Some(index) => first
                .call_export::<(), (Option<wit_balancing::LoadMeasure>,)>("measure", &index, ())?
                .0
                .map(crate::convert::load_measure),
            None => None,
        };
        if measure.is_some() && first.prepared().pre.1.select_two.is_none() {
            return Err(Fault::Invalid(
                "declares a load measure but exports no `select-two`".into(),
            ));
        }
        let hears = first.prepared().pre.1.feedback.is_some();
        // A two-choice selector's picks read the facts: never made ahead.
        let runs = measure.is_none() && first.prepared().pre.1.select_run.is_some();
        // Its pairs are compared when taken, by the facts of that moment.
        let pairs = measure.is_some() && first.prepared().pre.1.select_two_run.is_some();
        let owner = first.pool_owner();
        let members = instances
            .into_iter()
            .map(|inst| Member::new(Runner::Wasm(inst), owner.stats.clone()))
            .collect();
        Ok(SelectorPlugin {
            runs,
            pairs,
            ..SelectorPlugin::with_pool(Pool::new(members, owner), measure, hears, facts)
        })
    }

    /// A selector answered by a native twin (one member, like a stateful component).
    pub(crate) fn native(
        twin: Box<dyn NativeSelector>,
        owner: crate::pool::Owner,
        facts: Arc<FactsTable>,
    ) -> Self {
        let measure = twin.measure();
        let hears = twin.wants_feedback();
        let runs = measure.is_none() && twin.wants_runs();
        let pairs = measure.is_some() && twin.wants_runs();
        let member = Member::new(Runner::Native(twin), owner.stats.clone());
        SelectorPlugin {
            runs,
            pairs,
            ..SelectorPlugin::with_pool(Pool::new(vec![member], owner), measure, hears, facts)
        }
    }

    fn with_pool(
        pool: Pool<Member>,
        measure: Option<LoadMeasure>,
        hears: bool,
        facts: Arc<FactsTable>,
    ) -> Self {
        SelectorPlugin {
            id: NEXT_SELECTOR.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            pool,
            measure,
            hears,
            runs: false,
            pairs: false,
            facts,
            interned: std::sync::Mutex::new(HashMap::new()),
            next_set: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The measure the plugin declared (`two-choice-selector`), if it did.
    pub fn measure(&self) -> Option<LoadMeasure> {
        self.measure
    }

    /// Whether the plugin answers runs of picks (it exports `select-run`).
    pub fn runs(&self) -> bool {
        self.runs
    }

    /// Whether the two-choice plugin answers runs of pairs (it exports `select-two-run`).
    pub fn pairs(&self) -> bool {
        self.pairs
    }

    /// Whether the plugin hears how picks ended (it exports `feedback`).
    pub fn hears_outcomes(&self) -> bool {
        self.hears
    }

    /// Distinguishes this selector from the client's others.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id of the set with exactly these members, defining it on first sight. Called
    /// when a route is first seen, never per call.
    pub fn intern_set(&self, members: &[u32]) -> u32 {
        let mut interned = self.interned.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = interned.get(members) {
            return *id;
        }
        // Defined before the lock is released: a concurrent caller that finds the id
        // must find the set defined too.
        let id = self
            .next_set
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.define_set(id, members.to_vec());
        interned.insert(members.to_vec(), id);
        id
    }

    /// Pushes a new endpoint table to every instance; every set is forgotten.
    pub fn endpoints_changed(&self, table: &axle_spi::EndpointTable) {
        let wire = Arc::new(crate::convert::table(table));
        self.interned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.pool.each(|member| {
            // The picks made ahead go with the sets (`runs.rs`).
            member.sets.drain().for_each(|(_, set)| set.run.close());
            member.table = Some(wire.clone());
            member.generation += 1;
            if member.ensure().is_ok() {
                member.endpoints_changed(table, &wire);
            }
        });
    }

    /// Defines (or redefines) candidate set `id` on every instance.
    pub fn define_set(&self, id: u32, members: Vec<u32>) {
        let set = Arc::new(SetMembers {
            members: Membership::new(&members),
            loads: self
                .measure
                .is_some()
                .then(|| SetLoads::new(&self.facts, &members)),
            ids: members,
            run: Run::empty(),
        });
        self.pool.each(|member| {
            if let Some(old) = member.sets.insert(id, set.clone()) {
                old.run.close();
            }
            member.generation += 1;
            if member.ensure().is_ok() {
                member.define_set(id, &set.ids);
            }
        });
    }

    /// Picks a member of set `id`: the plugin's answer, or the safe default (a uniform
    /// random member) when it faults or is in quarantine. `None` if the set is unknown or
    /// empty, or no instance came free within the plugin's timeout (counted as busy): the
    /// caller then picks among its candidates itself.
    ///
    /// A run-selector's picks, and a two-choice run-selector's pairs, come from the set's
    /// run while it lasts (`sets.rs`, [`Run`]): the thread keeps the set it took from
    /// last, so such a pick takes neither the plugin's lock nor a lookup.
    pub fn select(&self, id: u32, hash_key: u64) -> Option<Selection> {
        if self.runs || self.pairs {
            return self.select_from_run(id);
        }
        self.ask(id, hash_key)
    }

    /// Asks the plugin for one pick of set `id`, whatever runs it made (what
    /// [`SelectorPlugin::select`] does for any other selector, and how `axle bench
    /// plugins` times the call itself).
    pub fn ask(&self, id: u32, hash_key: u64) -> Option<Selection> {
        let two = self.measure.as_ref();
        match self.pool.with(|member| member.select(id, hash_key, two)) {
            Ok(selection) => selection,
            Err(Fault::Quarantined) => self.quarantined(id),
            Err(_) => None,
        }
    }

    /// In quarantine: the safe default from the set the kernel keeps.
    fn quarantined(&self, id: u32) -> Option<Selection> {
        self.pool
            .peek(|member| member.sets.get(&id).map(|set| random_pick(&set.ids)))
            .flatten()
    }

    /// Records a finished call; delivered to the plugin in batches of
    /// [`FEEDBACK_BATCH`] from each thread. Nothing at all for a plugin that does not
    /// export `feedback`.
    pub fn feedback(&self, outcome: &axle_spi::Outcome) {
        if !self.hears {
            return;
        }
        let outcome = *outcome;
        let full = FEEDBACK.with(|buffers| {
            let mut buffers = buffers.borrow_mut();
            let buffer = buffers.entry(self.id).or_default();
            buffer.push(outcome);
            (buffer.len() >= FEEDBACK_BATCH).then(|| std::mem::take(buffer))
        });
        if let Some(mut batch) = full {
            // Busy or in quarantine: the batch is dropped (the kernel's facts keep it).
            let _ = self.pool.with(|member| {
                member.pending.append(&mut batch);
                member.flush();
            });
            batch.clear();
            // The emptied buffer goes back with its capacity: a batch costs no allocation.
            FEEDBACK.with(|buffers| {
                if let Some(slot) = buffers.borrow_mut().get_mut(&self.id) {
                    if slot.capacity() == 0 {
                        *slot = batch;
                    }
                }
            });
        }
    }
}

fn random_pick(ids: &[u32]) -> Selection {
    Selection {
        endpoint: ids[fastrand::usize(..ids.len())],
        by_plugin: false,
    }
}
