//! Weighted draws of members of one set: one, or a few distinct ones for the
//! power-of-choices selectors, each O(1) whatever the set size.

use crate::{member_weights, AliasTable};
use axle_sdk::{CandidateSet, EndpointId, EndpointTable, Rng};

/// Redraws allowed when a draw repeats an earlier one. A member holding share p of the
/// weight repeats with odds p per draw, so even at p = 0.75 the cap is reached about once
/// in 10,000 picks; then the next drawable member after a random position is taken
/// instead (a rare, slightly less weighted draw, but always a distinct one).
const REDRAWS: u32 = 32;

/// A set's weights, ready to sample by position in member order.
#[derive(Clone, Debug)]
pub struct WeightedSet {
    weights: Vec<u64>,
    alias: AliasTable,
    /// How many members have a weight (can be drawn).
    drawable: usize,
}

/// A two-choice selector's candidates: two distinct members of `set` drawn by weight, the
/// first draw first (a tie keeps it, so an idle set is served in proportion to the
/// weights: see [`WeightedSet::distinct`]). A set with one drawable member offers it
/// twice.
pub fn two_by_weight(
    set: &CandidateSet<WeightedSet>,
    rng: &mut Rng,
) -> Option<(EndpointId, EndpointId)> {
    let (first, second) = set.state.two(rng)?;
    Some((*set.members.get(first)?, *set.members.get(second)?))
}

impl WeightedSet {
    /// Reads the members' weights from the table (see [`member_weights`]).
    pub fn new(table: &EndpointTable, members: &[EndpointId]) -> Self {
        let weights = member_weights(table, members);
        let drawable = weights.iter().filter(|w| **w > 0).count();
        WeightedSet {
            alias: AliasTable::new(&weights),
            weights,
            drawable,
        }
    }

    /// A position drawn with probability weight / total.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        self.alias.sample(rng.next_u64())
    }

    /// Up to `k` distinct positions, in the order of successive weighted sampling: each
    /// drawn by weight among the ones not drawn yet (by redrawing repeats). All drawable
    /// members when there are at most `k` of them, in such an order too. Written into
    /// `out`. Why the order matters: in successive sampling, the first of any subset to be
    /// drawn is drawn with odds weight / the subset's weight, so a caller that keeps the
    /// earliest of tied candidates breaks ties in proportion to their weights.
    pub fn distinct(&self, rng: &mut Rng, k: usize, out: &mut Vec<usize>) {
        out.clear();
        if self.drawable <= k {
            out.extend((0..self.weights.len()).filter(|p| self.weights[*p] > 0));
            self.shuffle_by_weight(rng, out);
            return;
        }
        let mut redraws = 0;
        while out.len() < k {
            let p = self.sample(rng);
            if !out.contains(&p) {
                out.push(p);
            } else if redraws == REDRAWS {
                out.push(self.any_other(rng, out));
            } else {
                redraws += 1;
            }
        }
    }

    /// [`WeightedSet::distinct`] for two, without a buffer (the power of two choices, on
    /// every pick): the same draws in the same order. One drawable member comes back
    /// twice; none, `None`.
    pub fn two(&self, rng: &mut Rng) -> Option<(usize, usize)> {
        if self.drawable <= 2 {
            let mut few = [0usize; 2];
            let mut n = 0;
            for p in (0..self.weights.len()).filter(|p| self.weights[*p] > 0) {
                few[n] = p;
                n += 1;
            }
            self.shuffle_by_weight(rng, &mut few[..n]);
            return match n {
                0 => None,
                1 => Some((few[0], few[0])),
                _ => Some((few[0], few[1])),
            };
        }
        let first = self.sample(rng);
        for _ in 0..=REDRAWS {
            let second = self.sample(rng);
            if second != first {
                return Some((first, second));
            }
        }
        Some((first, self.any_other(rng, &[first])))
    }
}

impl WeightedSet {
    /// Reorders `positions` by successive weighted sampling: O(len²), for the few members
    /// of a set no larger than the number of choices.
    fn shuffle_by_weight(&self, rng: &mut Rng, positions: &mut [usize]) {
        for i in 0..positions.len() {
            let rest: u64 = positions[i..].iter().map(|p| self.weights[*p]).sum();
            let mut ticket = rng.below(rest.max(1));
            let mut chosen = i;
            for (j, p) in positions.iter().enumerate().skip(i) {
                if ticket < self.weights[*p] {
                    chosen = j;
                    break;
                }
                ticket -= self.weights[*p];
            }
            positions.swap(i, chosen);
        }
    }

    /// The first drawable member not in `taken`, from a random position on (there is one:
    /// only called while fewer than `drawable` are taken).
    fn any_other(&self, rng: &mut Rng, taken: &[usize]) -> usize {
        let n = self.weights.len();
        let start = rng.below(n as u64) as usize;
        (0..n)
            .map(|offset| (start + offset) % n)
            .find(|p| self.weights[*p] > 0 && !taken.contains(p))
            .unwrap_or(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(weights: &[u32]) -> (WeightedSet, Vec<EndpointId>) {
        let table = axle_sdk::testing::weighted_table(weights);
        let members: Vec<EndpointId> = (0..weights.len() as u32).collect();
        (WeightedSet::new(&table, &members), members)
    }

    #[test]
    fn two_draws_what_distinct_draws_for_two() {
        for weights in [
            &[100, 100, 600, 0][..],
            &[5, 0, 0],
            &[0, 7, 0, 9],
            &[1, 1_000_000, 1],
            &[100; 10],
        ] {
            let (s, _) = set(weights);
            let (mut a, mut b) = (Rng::seeded(5), Rng::seeded(5));
            let mut out = Vec::new();
            for _ in 0..2_000 {
                s.distinct(&mut a, 2, &mut out);
                let expected = match out[..] {
                    [only] => (only, only),
                    [first, second] => (first, second),
                    _ => unreachable!("a set with a weight gives one or two"),
                };
                assert_eq!(s.two(&mut b), Some(expected), "{weights:?}");
            }
        }
    }

    #[test]
    fn draws_distinct_members_first_by_weight() {
        let (s, _) = set(&[100, 100, 600, 0]);
        let mut rng = Rng::seeded(3);
        let mut out = Vec::new();
        let mut firsts = [0u32; 4];
        for _ in 0..40_000 {
            s.distinct(&mut rng, 2, &mut out);
            assert_eq!(
                out.len(),
                2,
                "two distinct draws (the cap is never hit here)"
            );
            assert_ne!(out[0], out[1]);
            assert!(!out.contains(&3), "weight 0 is never drawn");
            firsts[out[0]] += 1;
        }
        // The first draw alone follows the weights: 12.5 / 12.5 / 75 %.
        assert!((4_600..5_400).contains(&firsts[0]), "{firsts:?}");
        assert!((29_400..30_600).contains(&firsts[2]), "{firsts:?}");
    }

    #[test]
    fn small_sets_give_every_drawable_member() {
        let (s, _) = set(&[5, 0, 7]);
        let mut out = Vec::new();
        let mut rng = Rng::seeded(1);
        let mut firsts = [0u32; 3];
        for _ in 0..12_000 {
            s.distinct(&mut rng, 2, &mut out);
            assert!(out == [0, 2] || out == [2, 0], "{out:?}");
            firsts[out[0]] += 1;
        }
        // 5 : 7 of the first draws.
        assert!((4_700..5_300).contains(&firsts[0]), "{firsts:?}");
    }
}
