//! Two-choice selection: the plugin draws two candidates, the kernel keeps the lighter by
//! a measure the plugin declared once (`sdk/wit/kinds.wit`, world `two-choice-selector`).
//!
//! Why the kernel compares: a least-loaded pick needs each candidate's in-flight count or
//! latency, and pulling them through two host calls cost more than the rest of the pick
//! (a component host call is about 0.7× an empty component call; `docs/strategies.md`,
//! "What a pick costs"). The kernel holds those facts already, so it compares them where
//! they live. The plugin still decides who the candidates are and what "lighter" means.

use crate::{EndpointId, NO_PICK};

/// How the kernel weighs a candidate's load, declared by the plugin once after `init`.
///
/// A candidate's cost is `latency × (in-flight × mean-weight / weight + 1)` with every
/// part optional: without `per-weight` the in-flight count is taken as it is; without
/// `latency` the cost is the (weighted) in-flight count alone, with no `+ 1`. The lower
/// cost is kept; on a tie, the first candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadMeasure {
    /// Count in-flight requests per unit of effective weight, against the mean weight of
    /// the set: an endpoint of twice the weight carries twice the requests at one cost.
    pub per_weight: bool,
    /// Multiply by the latency EWMA: the cost becomes an expected wait, where the `+ 1` is
    /// the request being placed.
    pub latency: bool,
    /// The latency assumed for an endpoint with no answer yet (with `latency`): low, so a
    /// new endpoint gets tried.
    pub default_latency_ns: u64,
}

/// What the kernel knows of one candidate's load now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Requests sent and not yet answered.
    pub in_flight: u32,
    /// Latency EWMA in nanoseconds (0 before any answer).
    pub ewma_latency_ns: u64,
    /// Effective weight now.
    pub weight: u32,
}

impl From<crate::EndpointFacts> for Load {
    fn from(f: crate::EndpointFacts) -> Load {
        Load {
            in_flight: f.in_flight,
            ewma_latency_ns: f.ewma_latency_ns,
            weight: f.weight,
        }
    }
}

impl LoadMeasure {
    /// Whether the first candidate is kept: its cost is at most the second's, in a set
    /// whose mean effective weight is `mean_weight`. Compared without a division (both
    /// sides times both weights, each counted as at least 1), because two divisions per
    /// cost were a noticeable share of a pick: exactly in integers where the measure
    /// allows, else in floating point, where equal costs compare equal while the products
    /// stay within 53 bits (a latency of 1 ms and weights in the thousands are far below).
    #[inline]
    pub fn keeps_first(&self, first: Load, second: Load, mean_weight: f64) -> bool {
        let (fa, fb) = (u64::from(first.in_flight), u64::from(second.in_flight));
        let (wa, wb) = (
            u64::from(first.weight.max(1)),
            u64::from(second.weight.max(1)),
        );
        let latency = |l: Load| match l.ewma_latency_ns {
            0 => self.default_latency_ns,
            l => l,
        };
        match (self.per_weight, self.latency) {
            (false, false) => fa <= fb,
            // fa / wa <= fb / wb
            (true, false) => fa * wb <= fb * wa,
            // (fa + 1) × la <= (fb + 1) × lb
            (false, true) => {
                u128::from(fa + 1) * u128::from(latency(first))
                    <= u128::from(fb + 1) * u128::from(latency(second))
            }
            // la × (fa × m / wa + 1) <= lb × (fb × m / wb + 1)
            (true, true) => {
                let m = mean_weight.max(1.0);
                let side = |l: Load, f: u64, w: u64, other: u64| {
                    latency(l) as f64 * (f as f64 * m + w as f64) * other as f64
                };
                side(first, fa, wa, wb) <= side(second, fb, wb, wa)
            }
        }
    }
}

/// The mean of the weights above 0 (0 when there is none): a set's reference weight for
/// [`LoadMeasure::per_weight`]. A member of weight 0 is never drawn, so it does not count.
pub fn mean_weight(weights: impl IntoIterator<Item = u32>) -> f64 {
    let (sum, count) = weights
        .into_iter()
        .filter(|w| *w > 0)
        .fold((0u64, 0u64), |(s, c), w| (s + u64::from(w), c + 1));
    sum as f64 / count.max(1) as f64
}

/// Two candidates in the one scalar `select-two` returns: the first in the high half. A
/// scalar rather than a tuple, because a tuple comes back through the plugin's memory.
pub fn pack_pair(first: EndpointId, second: EndpointId) -> u64 {
    u64::from(first) << 32 | u64::from(second)
}

/// What a `select-two` answer means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pair {
    /// No pick: the kernel picks at random (the first half is [`NO_PICK`]).
    None,
    /// One candidate only (the second half is [`NO_PICK`], or repeats the first): kept
    /// without a comparison.
    One(EndpointId),
    /// Two candidates to compare.
    Two(EndpointId, EndpointId),
}

/// Reads a `select-two` answer.
pub fn unpack_pair(packed: u64) -> Pair {
    let (first, second) = ((packed >> 32) as u32, packed as u32);
    if first == NO_PICK {
        Pair::None
    } else if second == NO_PICK || second == first {
        Pair::One(first)
    } else {
        Pair::Two(first, second)
    }
}

/// The most picks one `select-run` answer carries: four 16-bit ids fill its `u64`.
pub const RUN: usize = 4;

/// A run's end: the 16 bits after its last pick (and every id a run cannot carry).
const RUN_END: u64 = 0xFFFF;

/// Ids a run carries are below this one (65,535); a pick at or past it ends the run.
pub const RUN_ID_LIMIT: EndpointId = RUN_END as EndpointId;

/// Up to [`RUN`] picks in the one scalar `select-run` returns, the first in the lowest 16
/// bits. The run ends at the first id a run cannot carry (65,535 or more) or after the
/// fourth; an empty run is all ones (the kernel then asks `select`). A scalar for the
/// reason `select-two`'s pair is one: a list comes back through the plugin's memory.
pub fn pack_run(picks: impl IntoIterator<Item = EndpointId>) -> u64 {
    let mut packed = u64::MAX;
    for (i, id) in picks.into_iter().take(RUN).enumerate() {
        if u64::from(id) >= RUN_END {
            break;
        }
        packed &= !(RUN_END << (16 * i));
        packed |= u64::from(id) << (16 * i);
    }
    packed
}

/// Takes the next pick off a packed run ([`pack_run`]); `None` once it is used up.
pub fn next_in_run(run: &mut u64) -> Option<EndpointId> {
    let id = *run & RUN_END;
    if id == RUN_END {
        return None;
    }
    *run = *run >> 16 | RUN_END << 48;
    Some(id as EndpointId)
}

/// How many picks a packed run ([`pack_run`]) carries.
pub fn run_len(run: u64) -> usize {
    (0..RUN)
        .take_while(|i| (run >> (16 * i)) & RUN_END != RUN_END)
        .count()
}

/// `run` with whole pairs only: an odd last pick, half a pair, is ended off.
pub fn whole_pairs(run: u64) -> u64 {
    let n = run_len(run);
    if n % 2 == 1 {
        run | RUN_END << (16 * (n - 1))
    } else {
        run
    }
}

/// Takes the next pair off a packed run of pairs (`two-choice-run-selector`'s
/// `select-two-run`: each pair's first, then its second); `None` once it is used up. A
/// pair cut short (its second missing) is dropped, and the run with it.
pub fn next_pair_in_run(run: &mut u64) -> Option<(EndpointId, EndpointId)> {
    let first = next_in_run(run)?;
    match next_in_run(run) {
        Some(second) => Some((first, second)),
        None => {
            *run = u64::MAX;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_pairs_yields_whole_pairs_only() {
        let mut run = pack_run([3, 5, 7, 7]);
        assert_eq!(next_pair_in_run(&mut run), Some((3, 5)));
        assert_eq!(next_pair_in_run(&mut run), Some((7, 7)));
        assert_eq!(next_pair_in_run(&mut run), None);
        let mut cut = pack_run([1, 2, 9]);
        assert_eq!(next_pair_in_run(&mut cut), Some((1, 2)));
        assert_eq!(next_pair_in_run(&mut cut), None, "half a pair is dropped");
        assert_eq!(cut, u64::MAX);
        let mut none = u64::MAX;
        assert_eq!(next_pair_in_run(&mut none), None);
        assert_eq!(whole_pairs(pack_run([1, 2, 9])), pack_run([1, 2]));
        assert_eq!(whole_pairs(pack_run([4])), u64::MAX);
        assert_eq!(whole_pairs(pack_run([1, 2, 3, 4])), pack_run([1, 2, 3, 4]));
        assert_eq!(whole_pairs(u64::MAX), u64::MAX);
        let lens = [
            u64::MAX,
            pack_run([4]),
            pack_run([1, 2, 9]),
            pack_run([1, 2, 3, 4]),
        ];
        assert_eq!(lens.map(run_len), [0, 1, 3, 4]);
    }

    #[test]
    fn a_run_packs_up_to_four_picks_and_ends_at_one_it_cannot_carry() {
        let unpack =
            |mut run: u64| std::iter::from_fn(move || next_in_run(&mut run)).collect::<Vec<_>>();
        assert_eq!(unpack(pack_run([3, 0, 7])), [3, 0, 7]);
        assert_eq!(
            unpack(pack_run([1, 2, 3, 4, 5])),
            [1, 2, 3, 4],
            "four at most"
        );
        assert_eq!(unpack(pack_run([65_534, 9])), [65_534, 9]);
        assert_eq!(
            unpack(pack_run([5, 65_535, 6])),
            [5],
            "ends at an id it cannot carry"
        );
        assert_eq!(pack_run([]), u64::MAX, "empty: all ones");
        assert_eq!(pack_run([70_000]), u64::MAX);
        assert_eq!(unpack(u64::MAX), Vec::<u32>::new());
    }

    fn load(in_flight: u32, ewma_latency_ns: u64, weight: u32) -> Load {
        Load {
            in_flight,
            ewma_latency_ns,
            weight,
        }
    }

    impl Load {
        fn with_latency(self, ewma_latency_ns: u64) -> Load {
            Load {
                ewma_latency_ns,
                ..self
            }
        }
    }

    #[test]
    fn in_flight_per_weight_compares_ratios_exactly() {
        let m = LoadMeasure {
            per_weight: true,
            ..Default::default()
        };
        // 1/100 and 2/200 are one load: the first is kept, whichever it is.
        assert!(m.keeps_first(load(1, 0, 100), load(2, 0, 200), 150.0));
        assert!(m.keeps_first(load(2, 0, 200), load(1, 0, 100), 150.0));
        assert!(!m.keeps_first(load(2, 0, 100), load(3, 0, 200), 150.0));
        // Idle endpoints tie, whatever their weights: the first draw is kept.
        assert!(m.keeps_first(load(0, 0, 1), load(0, 0, 900), 450.0));
        // A weight of 0 counts as 1 rather than dividing by zero.
        assert!(!m.keeps_first(load(1, 0, 0), load(1, 0, 2), 1.0));
    }

    #[test]
    fn latency_makes_an_expected_wait() {
        let m = LoadMeasure {
            latency: true,
            default_latency_ns: 1_000,
            ..Default::default()
        };
        // (0 + 1) × 5 µs against (1 + 1) × 2 µs.
        assert!(!m.keeps_first(load(0, 5_000, 100), load(1, 2_000, 100), 100.0));
        // A never-measured endpoint counts the default latency.
        assert!(m.keeps_first(load(0, 0, 100), load(0, 1_001, 100), 100.0));
        assert!(!m.keeps_first(load(1, 0, 100), load(0, 1_999, 100), 100.0));
        // Weights do not count without `per_weight`.
        assert!(m.keeps_first(load(1, 10, 1), load(1, 10, 1_000), 500.0));
    }

    #[test]
    fn latency_per_weight_is_p2c_cost() {
        let m = LoadMeasure {
            per_weight: true,
            latency: true,
            default_latency_ns: 1_000,
        };
        // Equal weights: the classic latency × (in-flight + 1): 10 × 4 against 14 × 3,
        // then 13 × 3.
        assert!(m.keeps_first(load(3, 10, 100), load(2, 14, 100), 100.0));
        assert!(!m.keeps_first(load(3, 10, 100), load(2, 14, 100).with_latency(13), 100.0));
        // Twice the weight carries twice the requests at one cost: a tie, either way.
        assert!(m.keeps_first(load(4, 10, 200), load(2, 10, 100), 150.0));
        assert!(m.keeps_first(load(2, 10, 100), load(4, 10, 200), 150.0));
        // Idle endpoints of equal latency tie whatever their weights.
        assert!(m.keeps_first(load(0, 0, 100), load(0, 0, 600), 350.0));
        assert!(m.keeps_first(load(0, 0, 600), load(0, 0, 100), 350.0));
        // 5 on weight 600 (mean 350): 1 + 5 × 350 / 600 ≈ 3.9 latencies, against 4.5 for
        // 1 on weight 100; 7 on 600 is 5.08.
        assert!(m.keeps_first(load(5, 10, 600), load(1, 10, 100), 350.0));
        assert!(!m.keeps_first(load(7, 10, 600), load(1, 10, 100), 350.0));
    }

    #[test]
    fn the_mean_weight_counts_drawable_members() {
        assert_eq!(mean_weight([100, 0, 600]), 350.0);
        assert_eq!(mean_weight([0, 0]), 0.0);
        assert_eq!(mean_weight([]), 0.0);
    }

    #[test]
    fn pairs_pack_and_unpack() {
        assert_eq!(unpack_pair(pack_pair(3, 9)), Pair::Two(3, 9));
        assert_eq!(unpack_pair(pack_pair(3, 3)), Pair::One(3));
        assert_eq!(unpack_pair(pack_pair(3, NO_PICK)), Pair::One(3));
        assert_eq!(unpack_pair(pack_pair(NO_PICK, 3)), Pair::None);
        assert_eq!(unpack_pair(u64::MAX), Pair::None);
        assert_eq!(unpack_pair(pack_pair(0, 1)), Pair::Two(0, 1));
    }
}
