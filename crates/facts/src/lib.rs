//! The kernel's per-endpoint facts: what calls measured (in-flight, latency EWMA, a window
//! of outcomes). The kernel owns them; plugins read them through `host.facts` and never
//! keep statistics of their own (`docs/architecture.md`, "Plugin principles").
//!
//! Readers are lock-free: the table is an `ArcSwap` of cells indexed by endpoint id, and
//! every counter is an atomic.

mod load;
mod window;

pub use load::{LoadSlot, Loads};
pub use window::{WindowCounts, BUCKETS as WINDOW_BUCKETS, WINDOW_MS};

use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axle_spi::OutcomeClass;
use load::LoadBlock;
use window::Window;

pub use axle_core::now_ns;

/// One endpoint's counters: its load facts in the table's dense slot for its id
/// ([`load`]), what finished calls taught (the window's 3.3 KiB of buckets, streaks,
/// totals) allocated apart on the first finished call, so a table of endpoints that were
/// never called stays small.
#[derive(Debug)]
pub struct EndpointCell {
    block: LoadBlock,
    /// The id's offset in its block.
    offset: usize,
    joined_ns: u64,
    record: std::sync::OnceLock<Box<Record>>,
}

/// What finished calls taught about an endpoint (all zero before the first). A finished
/// call writes the window's bucket and nothing else here but on a change (a failure, the
/// first success after one) or once a millisecond (the latest call's time): these lines
/// are read by every core's calls, and a write on each call would make each of them wait
/// for the line (`docs/performance.md`, "Totals kept by the window").
#[derive(Debug, Default)]
struct Record {
    /// Also the totals since the endpoint appeared ([`Window::totals`]).
    window: Window,
    consecutive_failures: AtomicU32,
    /// Kernel-clock time of the first and the latest finished call (0: none yet); the
    /// latest to within [`LAST_CALL_GRAIN_NS`].
    first_call_ns: AtomicU64,
    last_call_ns: AtomicU64,
}

/// How far the latest call's time may lag: it is shown in seconds.
const LAST_CALL_GRAIN_NS: u64 = 1_000_000;

impl EndpointCell {
    /// A new life for `id`, whose block is `block`.
    fn new(block: LoadBlock, id: u32, weight: u32) -> Self {
        let cell = EndpointCell {
            block,
            offset: id as usize % load::BLOCK,
            joined_ns: now_ns(),
            record: std::sync::OnceLock::new(),
        };
        cell.slot().restart(weight);
        cell
    }

    fn slot(&self) -> &LoadSlot {
        self.block.slot(self.offset)
    }

    /// Calls finished and endpoint faults among them, since the endpoint appeared.
    pub fn totals(&self) -> (u64, u64) {
        self.record.get().map_or((0, 0), |r| r.window.totals())
    }

    /// A request was sent.
    pub fn started(&self) {
        self.slot().started();
    }

    /// A request finished after `latency_ns`, ending as `class`.
    pub fn finished(&self, latency_ns: u64, class: OutcomeClass) {
        self.finished_at(now_ns(), latency_ns, class);
    }

    /// [`EndpointCell::finished`] at `now` on the kernel clock, for a caller that has
    /// just read the clock for the latency (`axle_core::ns_at`).
    pub fn finished_at(&self, now: u64, latency_ns: u64, class: OutcomeClass) {
        let slot = self.slot();
        slot.ended();
        slot.record_latency(latency_ns);
        let record = self.record.get_or_init(Box::default);
        record.window.record(now, class, latency_ns);
        if record.first_call_ns.load(Relaxed) == 0 {
            let _ = record
                .first_call_ns
                .compare_exchange(0, now.max(1), Relaxed, Relaxed);
        }
        let last = record.last_call_ns.load(Relaxed);
        if last == 0 || now >= last + LAST_CALL_GRAIN_NS {
            record.last_call_ns.store(now.max(1), Relaxed);
        }
        match class {
            OutcomeClass::Timeout | OutcomeClass::Failure => {
                record.consecutive_failures.fetch_add(1, Relaxed);
            }
            OutcomeClass::Success => {
                if record.consecutive_failures.load(Relaxed) != 0 {
                    record.consecutive_failures.store(0, Relaxed);
                }
            }
            OutcomeClass::Rejected => {}
        }
    }

    /// A request that [`EndpointCell::started`] ended without an outcome (its caller
    /// stopped waiting: a hedge's loser, a dropped call): no longer in flight, and nothing
    /// learnt about the endpoint.
    pub fn abandoned(&self) {
        self.slot().ended();
    }

    /// Sets the weight discovery gave.
    pub fn set_weight(&self, weight: u32) {
        self.slot().set_weight(weight);
    }

    /// Sets the warm-up factor (per mille; 1000 = warmed up).
    pub fn set_warmup_permille(&self, permille: u32) {
        self.slot().set_warmup_permille(permille);
    }

    /// Sets the health factor (per mille) from a verdict.
    pub fn set_health_permille(&self, permille: u32) {
        self.slot().set_health_permille(permille);
    }

    /// Configured weight × warm-up × health; at least 1 while the configured weight is
    /// not 0, so a ramping endpoint still gets its first calls.
    pub fn effective_weight(&self) -> u32 {
        self.slot().effective_weight()
    }

    /// Consecutive endpoint faults up to now (reset by a success).
    pub fn consecutive_failures(&self) -> u32 {
        self.record
            .get()
            .map_or(0, |r| r.consecutive_failures.load(Relaxed))
    }

    /// The window's counts now.
    pub fn window(&self) -> WindowCounts {
        self.record
            .get()
            .map_or(WindowCounts::default(), |r| r.window.counts(now_ns()))
    }

    /// Kernel-clock times of the first and the latest finished call (0: none).
    pub fn call_times_ns(&self) -> (u64, u64) {
        self.record.get().map_or((0, 0), |r| {
            (r.first_call_ns.load(Relaxed), r.last_call_ns.load(Relaxed))
        })
    }

    /// Forgets the window and the failure streak: a re-admitted endpoint is judged on
    /// what it does from now on.
    pub fn fresh_start(&self) {
        if let Some(record) = self.record.get() {
            record.window.clear();
            record.consecutive_failures.store(0, Relaxed);
        }
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> u32 {
        self.slot().in_flight()
    }

    /// What a two-choice selector's measure reads (`axle_spi::LoadMeasure`): three facts,
    /// without the window a snapshot also counts.
    pub fn load(&self) -> axle_spi::Load {
        self.slot().load()
    }

    /// A snapshot in WIT form.
    pub fn snapshot(&self) -> axle_spi::EndpointFacts {
        let now = now_ns();
        let (window_total, window_failures) = self
            .record
            .get()
            .map_or((0, 0), |r| r.window.total_and_faults(now));
        let slot = self.slot();
        axle_spi::EndpointFacts {
            in_flight: slot.in_flight(),
            ewma_latency_ns: slot.ewma_latency_ns(),
            weight: slot.effective_weight(),
            window_total,
            window_failures,
            age_ns: now.saturating_sub(self.joined_ns),
        }
    }
}

/// Every endpoint's cell, by id. Ids are per process (per plugin host): the same address
/// is the same endpoint, with the same facts, for every client in it.
#[derive(Debug, Default)]
pub struct FactsTable {
    cells: ArcSwap<Vec<Option<Arc<EndpointCell>>>>,
    /// The cells' load slots, by block of ids (see [`load`]); a block outlives its cells,
    /// so an id's slot is the same through every life of the endpoint.
    blocks: ArcSwap<Vec<Option<LoadBlock>>>,
    ids: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl FactsTable {
    /// An empty table.
    pub fn new() -> Arc<Self> {
        Arc::new(FactsTable::default())
    }

    /// The id and cell of the endpoint at `address`, allocated on first sight.
    pub fn allocate(&self, address: &str, weight: u32) -> (u32, Arc<EndpointCell>) {
        let id = {
            let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
            let next = ids.len() as u32;
            *ids.entry(address.to_string()).or_insert(next)
        };
        (id, self.register(id, weight))
    }

    /// [`FactsTable::allocate`] for many endpoints at once, with one copy of the table
    /// rather than one per endpoint (a simulated cluster of 100,000 endpoints would
    /// otherwise copy the table 100,000 times).
    pub fn allocate_all(&self, endpoints: &[(&str, u32)]) -> Vec<(u32, Arc<EndpointCell>)> {
        let ids: Vec<u32> = {
            let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
            endpoints
                .iter()
                .map(|(address, _)| {
                    let next = ids.len() as u32;
                    *ids.entry(address.to_string()).or_insert(next)
                })
                .collect()
        };
        let fresh: Vec<Option<Arc<EndpointCell>>> = ids
            .iter()
            .zip(endpoints)
            .map(|(id, (_, weight))| {
                self.get(*id)
                    .is_none()
                    .then(|| Arc::new(EndpointCell::new(self.block(*id), *id, *weight)))
            })
            .collect();
        self.cells.rcu(|cells| {
            let mut next = Vec::clone(cells);
            for (id, cell) in ids.iter().zip(&fresh) {
                let slot = *id as usize;
                if next.len() <= slot {
                    next.resize(slot + 1, None);
                }
                if next[slot].is_none() {
                    next[slot] = cell.clone();
                }
            }
            next
        });
        let cells = self.cells.load();
        ids.iter()
            .zip(fresh)
            .map(|(id, fresh)| {
                let cell = cells.get(*id as usize).cloned().flatten();
                (*id, cell.or(fresh).expect("allocated above"))
            })
            .collect()
    }

    /// The cell of endpoint `id`, created with `weight` if new.
    pub fn register(&self, id: u32, weight: u32) -> Arc<EndpointCell> {
        if let Some(cell) = self.get(id) {
            return cell;
        }
        let cell = Arc::new(EndpointCell::new(self.block(id), id, weight));
        self.cells.rcu(|cells| {
            let mut next = Vec::clone(cells);
            let slot = id as usize;
            if next.len() <= slot {
                next.resize(slot + 1, None);
            }
            if next[slot].is_none() {
                next[slot] = Some(cell.clone());
            }
            next
        });
        self.get(id).unwrap_or(cell)
    }

    /// The block holding `id`'s slot, allocated on first need.
    fn block(&self, id: u32) -> LoadBlock {
        let index = id as usize / load::BLOCK;
        if let Some(Some(block)) = self.blocks.load().get(index) {
            return block.clone();
        }
        let fresh = LoadBlock::new();
        self.blocks.rcu(|blocks| {
            let mut next = Vec::clone(blocks);
            if next.len() <= index {
                next.resize(index + 1, None);
            }
            next[index].get_or_insert_with(|| fresh.clone());
            next
        });
        self.blocks.load()[index]
            .clone()
            .expect("the block was put in above")
    }

    /// Every endpoint's load slot by id, as the table is now: a selector's candidate set
    /// reads its members' loads through it on every two-choice pick.
    pub fn loads(&self) -> Loads {
        Loads(self.blocks.load().iter().cloned().collect())
    }

    /// Forgets endpoint `id` (it left the table).
    pub fn remove(&self, id: u32) {
        self.cells.rcu(|cells| {
            let mut next = Vec::clone(cells);
            if let Some(slot) = next.get_mut(id as usize) {
                *slot = None;
            }
            next
        });
    }

    /// The cell of endpoint `id`.
    pub fn get(&self, id: u32) -> Option<Arc<EndpointCell>> {
        self.cells.load().get(id as usize).cloned().flatten()
    }

    /// What `host.in-flight(id)` answers.
    pub fn in_flight(&self, id: u32) -> u32 {
        self.cells
            .load()
            .get(id as usize)
            .and_then(|c| c.as_ref())
            .map_or(0, |c| c.in_flight())
    }

    /// What `host.facts(id)` answers.
    pub fn snapshot(&self, id: u32) -> Option<axle_spi::EndpointFacts> {
        self.cells
            .load()
            .get(id as usize)
            .and_then(|c| c.as_ref())
            .map(|c| c.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_life_of_an_id_reads_and_writes_one_load_slot() {
        let table = FactsTable::new();
        let far = load::BLOCK as u32 * 3 + 7;
        let cell = table.register(far, 100);
        cell.started();
        cell.set_health_permille(500);
        let loads = table.loads();
        assert_eq!(
            loads
                .slot(far)
                .map(|s| (s.in_flight(), s.effective_weight())),
            Some((1, 50))
        );
        assert!(
            loads.slot(0).is_none(),
            "the blocks below were never needed"
        );
        table.remove(far);
        let again = table.register(far, 200);
        assert!(!Arc::ptr_eq(&cell, &again));
        assert_eq!((again.in_flight(), again.effective_weight()), (1, 200));
        cell.finished(5_000, OutcomeClass::Success);
        assert_eq!(table.loads().slot(far).unwrap().load().in_flight, 0);
    }

    #[test]
    fn counts_in_flight_and_smooths_latency() {
        let table = FactsTable::new();
        let cell = table.register(3, 100);
        cell.started();
        cell.started();
        assert_eq!(table.snapshot(3).unwrap().in_flight, 2);
        cell.finished(8_000, OutcomeClass::Success);
        cell.finished(16_000, OutcomeClass::Timeout);
        let f = table.snapshot(3).unwrap();
        assert_eq!(f.in_flight, 0);
        assert_eq!(f.ewma_latency_ns, 8_000 - 1_000 + 2_000);
        assert_eq!((f.window_total, f.window_failures), (2, 1));
        assert_eq!(cell.consecutive_failures(), 1);
        assert_eq!(f.weight, 100);
        cell.set_warmup_permille(500);
        cell.set_health_permille(100);
        assert_eq!(cell.effective_weight(), 5);
        cell.finished(1, OutcomeClass::Success);
        assert_eq!(
            table.snapshot(3).unwrap().in_flight,
            0,
            "never wraps below zero"
        );
        assert!(table.snapshot(2).is_none());
        table.remove(3);
        assert!(table.snapshot(3).is_none());
    }

    #[test]
    fn many_allocated_at_once_are_the_same_as_one_by_one() {
        let table = FactsTable::new();
        let (first, cell) = table.allocate("a:1", 10);
        cell.started();
        let all = table.allocate_all(&[("b:2", 20), ("a:1", 99), ("c:3", 30)]);
        let ids: Vec<u32> = all.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![1, first, 2]);
        assert_eq!(
            all[1].1.in_flight(),
            1,
            "an existing endpoint keeps its cell"
        );
        assert_eq!(table.snapshot(2).unwrap().weight, 30);
        assert!(Arc::ptr_eq(&all[0].1, &table.get(1).unwrap()));
        assert_eq!(table.allocate("c:3", 1).0, 2);
    }

    #[test]
    fn an_abandoned_request_leaves_flight_and_no_trace() {
        let table = FactsTable::new();
        let cell = table.register(1, 100);
        cell.started();
        cell.started();
        cell.abandoned();
        let f = table.snapshot(1).unwrap();
        assert_eq!((f.in_flight, f.window_total), (1, 0));
        assert_eq!(cell.totals(), (0, 0));
        cell.abandoned();
        cell.abandoned();
        assert_eq!(cell.in_flight(), 0, "never wraps below zero");
    }

    #[test]
    fn totals_streaks_and_call_times_follow_the_calls() {
        let table = FactsTable::new();
        let cell = table.register(1, 100);
        let ms = 1_000_000;
        for (at, class) in [
            (5 * ms, OutcomeClass::Success),
            (6 * ms, OutcomeClass::Timeout),
            (6 * ms + 1, OutcomeClass::Failure),
            (9 * ms, OutcomeClass::Rejected),
        ] {
            cell.started();
            cell.finished_at(at, 1_000, class);
        }
        assert_eq!(cell.totals(), (4, 2));
        assert_eq!(
            cell.consecutive_failures(),
            2,
            "a refusal neither adds nor resets"
        );
        // The latest call's time moves by whole grains, not on every call.
        assert_eq!(cell.call_times_ns(), (5 * ms, 9 * ms));
        cell.finished_at(9 * ms + 10, 1_000, OutcomeClass::Success);
        assert_eq!(cell.call_times_ns(), (5 * ms, 9 * ms));
        assert_eq!(cell.consecutive_failures(), 0);
        cell.fresh_start();
        assert_eq!(
            cell.totals(),
            (5, 2),
            "a fresh start forgets the window, not the totals"
        );
        assert_eq!(cell.window().total, 0);
    }
}
