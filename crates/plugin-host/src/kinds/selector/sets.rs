//! What the kernel keeps of each candidate set it defined for a selector: the members, a
//! membership test for checking answers, and for a two-choice selector the members' facts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Release};
use std::sync::{Arc, Mutex, MutexGuard};

use axle_facts::{FactsTable, Loads};
use axle_spi::{Load, LoadMeasure};
use rustc_hash::FxHashSet;

/// A candidate set as the kernel defined it.
pub(super) struct SetMembers {
    /// In the kernel's order, as pushed to the plugin.
    pub ids: Vec<u32>,
    /// To check an answer.
    pub members: Membership,
    /// For a two-choice selector: the members' load slots, so a pick reads the two
    /// candidates' counters without a look at the facts table (whose lock-free load
    /// alone cost a tenth of an empty component call), and their mean effective weight
    /// when the set was defined, what a `per-weight` measure counts against.
    pub loads: Option<SetLoads>,
    /// For a run-selector: the picks threads handed back, and whether the set is closed
    /// (`runs.rs`).
    pub run: Run,
}

/// The most handed-back picks a set keeps: each thread hands back at most one ask's runs
/// less their first pick, and the next ask of the set takes them before the plugin is
/// asked, so this is only reached by many threads leaving one set at once.
const LEFT_MAX: usize = 256;

/// What a set keeps of its run-selector's runs ([`SetMembers::run`]). A run is held by the
/// thread that asked for it; a thread that moves on to another set (or ends) hands the
/// picks it did not use back here, and the next ask of this set takes them before the
/// plugin makes new ones, so no pick is dropped and a rotation's shares stay its own.
///
/// Every pick taken from a held run reads `closed`, and every ask of the plugin reads
/// `any_left`; neither is written by a pick, nor by an ask that finds nothing handed back,
/// so both stay in every core's cache.
/// The handed-back picks' lock, which an ask took every time before `any_left` said
/// whether there was anything to take, is on a line of its own: written by both cores,
/// beside `closed` it made a held pick wait for that line (in one profile of several, a
/// third of the held path's samples: `docs/performance.md`, "A held run's flag, and its
/// set's counts, left alone").
pub(super) struct Run {
    /// Handed-back picks, oldest first.
    left: Left,
    /// Whether `left` holds a pick: set and cleared under its lock.
    any_left: AtomicBool,
    /// The set was forgotten or redefined: picks held for it are not served.
    closed: AtomicBool,
}

/// [`Run::left`], on cache lines no other field shares.
#[repr(align(64))]
struct Left(Mutex<VecDeque<u32>>);

impl Run {
    pub fn empty() -> Run {
        Run {
            left: Left(Mutex::new(VecDeque::new())),
            any_left: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    fn left(&self) -> MutexGuard<'_, VecDeque<u32>> {
        self.left.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether picks held for this set may still be served. Read on every pick taken from
    /// a held run: a line no pick writes.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// Drops the picks left, for good: the set was forgotten or redefined, and a thread
    /// that still holds a run of it must ask the plugin for the set that replaced it.
    pub fn close(&self) {
        self.closed.store(true, Release);
        let mut left = self.left();
        left.clear();
        self.any_left.store(false, Release);
    }

    /// Keeps the picks of `runs` (each packed, `axle_spi::pack_run`), in order, for the
    /// next ask of the set. Nothing to keep takes no lock.
    pub fn hand_back(&self, runs: &[u64]) {
        if runs.iter().all(|&run| run == u64::MAX) || self.is_closed() {
            return;
        }
        let mut left = self.left();
        for mut run in runs.iter().copied() {
            while let Some(pick) = axle_spi::next_in_run(&mut run) {
                if left.len() < LEFT_MAX {
                    left.push_back(pick);
                }
            }
        }
        if !left.is_empty() {
            self.any_left.store(true, Release);
        }
    }

    /// Up to `N` runs' worth of handed-back picks, oldest first, packed a run at a time
    /// (the runs after the last pick all ones): what one ask of the plugin would have
    /// made, so a thread that takes them keeps their order as it would keep its own.
    /// `None` if none. Without a pick left, the lock is not taken: a pick handed back
    /// while this looks is taken by the next ask.
    pub fn take_left<const N: usize>(&self) -> Option<[u64; N]> {
        if !self.any_left.load(Acquire) {
            return None;
        }
        let mut left = self.left();
        if left.is_empty() {
            return None;
        }
        let mut runs = [u64::MAX; N];
        for run in &mut runs {
            let n = left.len().min(axle_spi::RUN);
            *run = axle_spi::pack_run(left.drain(..n));
        }
        if left.is_empty() {
            self.any_left.store(false, Release);
        }
        Some(runs)
    }
}

/// The facts a two-choice selector's measure reads, for the members of one set.
pub(super) struct SetLoads {
    /// The facts table's load slots as of the set's definition (shared, not copied): a
    /// client allocates an endpoint's cell before it pushes the table, and the set is
    /// redefined when the endpoints change.
    loads: Loads,
    /// Asked for a member whose slot came after the set, which no kernel path makes.
    facts: Arc<FactsTable>,
    mean_weight: f64,
}

impl SetLoads {
    pub fn new(facts: &Arc<FactsTable>, members: &[u32]) -> SetLoads {
        // A slot with no cell yet weighs 0, which the mean leaves out.
        let loads = facts.loads();
        let mean_weight = axle_spi::mean_weight(
            members
                .iter()
                .filter_map(|&id| loads.slot(id))
                .map(|slot| slot.effective_weight()),
        );
        SetLoads {
            loads,
            facts: facts.clone(),
            mean_weight,
        }
    }

    /// Of two members, the one `measure` keeps, by the kernel's facts now (a member
    /// without facts has no load).
    pub fn lighter(&self, measure: &LoadMeasure, first: u32, second: u32) -> u32 {
        let load = |id: u32| match self.loads.slot(id) {
            Some(slot) => slot.load(),
            None => self
                .facts
                .loads()
                .slot(id)
                .map_or(Load::default(), |s| s.load()),
        };
        if measure.keeps_first(load(first), load(second), self.mean_weight) {
            first
        } else {
            second
        }
    }
}

/// A bitmap may spend this many more words than the set has members (1 KiB) on ids
/// spread wider than their count.
const SPARE_WORDS: usize = 128;

/// Which endpoints a set holds, to check a plugin's answer on every pick, in one load.
/// Endpoint ids are the kernel's slot indices, dense from 0, so a bitmap over them costs
/// at most a bit per slot: 1.25 KiB at 10,000 endpoints, against 120 KiB for a hash set
/// and 14 dependent loads for a binary search (which had checking `round-robin`'s answer
/// cost more than choosing it at 10,000 endpoints, `axle bench plugins`). Ids spread far
/// wider than their count (a caller choosing its own) get a hash set instead, so no set
/// costs more than a few words per member.
pub(super) enum Membership {
    Bits(Box<[u64]>),
    Hashed(FxHashSet<u32>),
}

impl Membership {
    pub fn new(ids: &[u32]) -> Self {
        let words = ids.iter().max().map_or(0, |&max| max as usize / 64 + 1);
        if words > ids.len() + SPARE_WORDS {
            return Membership::Hashed(ids.iter().copied().collect());
        }
        let mut bits = vec![0u64; words].into_boxed_slice();
        for &id in ids {
            bits[id as usize / 64] |= 1 << (id % 64);
        }
        Membership::Bits(bits)
    }

    pub fn contains(&self, id: u32) -> bool {
        match self {
            Membership::Bits(bits) => bits
                .get(id as usize / 64)
                .is_some_and(|word| word >> (id % 64) & 1 == 1),
            Membership::Hashed(set) => set.contains(&id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_answers_alike_for_dense_and_sparse_ids() {
        // (count, spacing, expect a bitmap): ids `i * spacing`, out of order, one repeated.
        for (n, spacing, bitmap) in [
            (0u32, 1u32, true),
            (1, 1, true),
            (10, 3, true),
            (10_000, 1, true),
            (10_000, 3, true),
            (64, 1_000, false),
            (3, 1 << 20, false),
        ] {
            let mut ids: Vec<u32> = (0..n).map(|i| i * spacing).rev().collect();
            ids.extend(ids.first().copied());
            let m = Membership::new(&ids);
            assert_eq!(matches!(m, Membership::Bits(_)), bitmap, "{n} by {spacing}");
            if let Membership::Bits(bits) = &m {
                assert!(bits.len() <= ids.len() + SPARE_WORDS, "{n} by {spacing}");
            }
            let top = n.saturating_mul(spacing).saturating_add(70);
            for probe in (0..top.min(40_000)).chain([top, u32::MAX]) {
                assert_eq!(
                    m.contains(probe),
                    ids.contains(&probe),
                    "{n} by {spacing}: {probe}"
                );
            }
        }
    }

    #[test]
    fn picks_handed_back_are_taken_oldest_first_an_ask_at_a_time_until_none_is_left() {
        let run = Run::empty();
        let pack = |ids: &[u32]| axle_spi::pack_run(ids.iter().copied());
        const NONE: u64 = u64::MAX;
        assert_eq!(run.take_left::<2>(), None, "nothing handed back");
        run.hand_back(&[NONE, NONE]);
        assert_eq!(run.take_left::<2>(), None, "nothing to keep");
        run.hand_back(&[pack(&[1, 2, 3]), pack(&[4, 5, 6, 7])]);
        run.hand_back(&[pack(&[8, 9]), NONE]);
        let mut taken = Vec::new();
        while let Some(runs) = run.take_left::<2>() {
            let before = taken.len();
            for mut picks in runs {
                while let Some(pick) = axle_spi::next_in_run(&mut picks) {
                    taken.push(pick);
                }
            }
            assert!(taken.len() - before <= 2 * axle_spi::RUN);
        }
        assert_eq!(taken, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(run.take_left::<2>(), None, "all taken");
        // Handed back again after all was taken: taken again, packed a run at a time.
        run.hand_back(&[pack(&[1, 2, 3, 4]), pack(&[5])]);
        assert_eq!(
            run.take_left::<3>(),
            Some([pack(&[1, 2, 3, 4]), pack(&[5]), NONE])
        );
        // A closed set keeps nothing, and takes nothing more.
        run.hand_back(&[pack(&[7])]);
        run.close();
        run.hand_back(&[pack(&[8])]);
        assert_eq!(run.take_left::<2>(), None);
        assert!(run.is_closed());
    }
}
