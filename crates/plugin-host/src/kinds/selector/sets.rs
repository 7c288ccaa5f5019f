//! What the kernel keeps of each candidate set it defined for a selector: the members, a
//! membership test for checking answers, and for a two-choice selector the members' facts.

use std::sync::atomic::{AtomicU64, Ordering::AcqRel, Ordering::Acquire};
use std::sync::Arc;

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
    /// For a run-selector: the picks its last `select-run` made that no call has taken
    /// yet, packed (`axle_spi::pack_run`; all ones: none). One per set, shared by every
    /// thread, so the picks go out in the plugin's order and none is dropped when a
    /// thread moves on to another set: a rotation's shares stay its own.
    pub run: Run,
}

/// A set's picks made ahead ([`SetMembers::run`]).
pub(super) struct Run(AtomicU64);

impl Run {
    pub fn empty() -> Run {
        Run(AtomicU64::new(u64::MAX))
    }

    /// The next pick made ahead, if any is left.
    pub fn take(&self) -> Option<u32> {
        let mut now = self.0.load(Acquire);
        loop {
            let mut after = now;
            let pick = axle_spi::next_in_run(&mut after)?;
            match self.0.compare_exchange_weak(now, after, AcqRel, Acquire) {
                Ok(_) => return Some(pick),
                Err(seen) => now = seen,
            }
        }
    }

    /// Drops the picks left, for good: the set was forgotten or redefined, and a thread
    /// that still holds it must ask the plugin for the set that replaced it.
    pub fn close(&self) {
        self.0.store(u64::MAX, std::sync::atomic::Ordering::Release);
    }

    /// Holds `rest`, the picks of a run after the one its caller takes, if the run is
    /// still empty (it is under the instance's lock; of two instances refilling at once,
    /// the later one's picks are dropped, which only a stateless selector can have).
    pub fn refill(&self, rest: u64) {
        let _ = self.0.compare_exchange(u64::MAX, rest, AcqRel, Acquire);
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
}
