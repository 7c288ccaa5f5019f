//! Nginx's smooth weighted round-robin, computed per weight class instead of per member.
//!
//! Nginx, per pick: every member's `current += weight`; the member with the largest
//! `current` is picked (the first in member order on a tie) and `current -= total`. After t
//! picks a member that was picked k times has `current = t·weight − k·total`. Members of
//! equal weight therefore differ only by how often they were picked: the least-picked one
//! (first in member order on a tie) leads its class, and a class hands out its picks in
//! member order, lap after lap. So it is enough to run Nginx's rule over the *classes* — one
//! `current` per distinct weight, standing for the class's next member — which gives the
//! very same sequence at O(distinct weights) per pick instead of O(members). Sets usually
//! have a handful of distinct effective weights (configured weights, a few endpoints
//! warming up or demoted by health), so a pick costs the same at 10 or 10,000 members.
//!
//! The sequence is also periodic: after `Σ weight / gcd(weights)` picks every member has
//! been picked `weight / gcd` times, every `current` is back to 0 and every class at its
//! first member, so the picks start over. When that period is short (equal weights: one
//! pick per member; a few weight tiers with a large common divisor: a few picks per
//! member) the set keeps it written out, and a pick is one read and a step instead of a
//! turn per class with its comparisons, which in a component cost about a tenth of the
//! call ("A weighted rotation written out" in `docs/performance.md`).

/// The members of one weight, in member order, and the state of its next member.
#[derive(Debug)]
struct Class {
    weight: i64,
    /// (position in the set's member order, endpoint id) of the class's members, by
    /// position; together so a pick reads one cache line.
    members: Vec<(u32, u32)>,
    /// Picks the class has made so far in its current lap: `members[next]` is next.
    next: usize,
    /// Nginx's `current` of the member at `members[next]`.
    current: i64,
}

/// The longest period any set keeps written out: 4 KiB of ids, whatever its size.
const PERIOD_MAX: i64 = 1024;

/// A larger set may keep a period of this many picks per member (16 bytes of ids a
/// member, twice what the set's classes hold): equal weights (one pick each)
/// and tiered ones such as 100 / 150 / 200 (gcd 50: three picks a member on average)
/// fit at any size, where a period of the set's total weight (weights with no common
/// divisor, as while endpoints warm up) does not and is picked by class.
const PERIOD_PER_MEMBER: i64 = 4;

/// Past `PERIOD_MAX`, a period is written out only for at most this many weight
/// classes: writing it costs a turn per class per pick, and this bounds that to 32 turns
/// a member (a set is defined inside a plugin call, which has a time budget).
const CLASSES_MAX: usize = 8;

/// Whether a set of `members` in `classes` weight classes keeps a period of `period`
/// picks written out.
fn writes_out(period: i64, members: usize, classes: usize) -> bool {
    period <= PERIOD_MAX
        || (period <= PERIOD_PER_MEMBER.saturating_mul(members as i64) && classes <= CLASSES_MAX)
}

/// The per-set state: the classes, and the total weight subtracted from each pick.
#[derive(Debug)]
pub struct Schedule {
    classes: Vec<Class>,
    total: i64,
    /// One whole period of picks when it is short enough (`writes_out`), else empty.
    period: Vec<u32>,
    /// The next pick's place in `period`.
    at: usize,
}

impl Schedule {
    /// Groups the members (their ids and weights, in member order) by weight. Members of
    /// weight 0 are never picked, unless every weight is 0 (see `member_weights`).
    pub fn new(ids: &[u32], weights: &[u64]) -> Self {
        let mut order: Vec<(u64, u32, u32)> = weights
            .iter()
            .zip(ids)
            .enumerate()
            .filter(|(_, (w, _))| **w > 0)
            .map(|(i, (w, id))| (*w, i as u32, *id))
            .collect();
        order.sort_unstable();
        let mut classes: Vec<Class> = Vec::new();
        for (weight, position, id) in order {
            // Clamp so `current` can never overflow: i64 holds 2^63 / 2^32 = 2^31 members.
            let weight = weight.min(u64::from(u32::MAX)) as i64;
            match classes.last_mut() {
                Some(c) if c.weight == weight => c.members.push((position, id)),
                _ => classes.push(Class {
                    weight,
                    members: vec![(position, id)],
                    next: 0,
                    current: 0,
                }),
            }
        }
        let total = classes
            .iter()
            .map(|c| c.weight * c.members.len() as i64)
            .sum();
        let mut schedule = Schedule {
            classes,
            total,
            period: Vec::new(),
            at: 0,
        };
        let gcd = schedule.classes.iter().fold(0, |g, c| gcd(g, c.weight));
        if gcd > 0 && writes_out(total / gcd, ids.len(), schedule.classes.len()) {
            // Written from the classes' own picks, which end where they began.
            schedule.period = (0..total / gcd)
                .map_while(|_| schedule.pick_by_class())
                .collect();
        }
        schedule
    }

    /// The endpoint of the next pick; `None` for a set with no weight.
    #[inline]
    pub fn pick(&mut self) -> Option<u32> {
        if let Some(id) = self.period.get(self.at) {
            self.at += 1;
            if self.at == self.period.len() {
                self.at = 0;
            }
            return Some(*id);
        }
        self.pick_by_class()
    }

    /// Nginx's rule over the classes: the next pick, one turn per class.
    fn pick_by_class(&mut self) -> Option<u32> {
        // The leader so far: its index, its `current` and its next member's position, kept
        // here so each turn compares against values in hand rather than reading them again.
        let mut best: Option<(usize, i64, u32)> = None;
        for (i, c) in self.classes.iter_mut().enumerate() {
            c.current += c.weight;
            let position = c.members[c.next].0;
            let leads = best.is_none_or(|(_, current, at)| {
                c.current > current || (c.current == current && position < at)
            });
            if leads {
                best = Some((i, c.current, position));
            }
        }
        let c = &mut self.classes[best?.0];
        let (_, id) = c.members[c.next];
        c.next += 1;
        if c.next == c.members.len() {
            // The lap is over: the class's next member is its first again, which has been
            // picked once more than the rest of the class, so its `current` is one total lower.
            c.next = 0;
            c.current -= self.total;
        }
        Some(id)
    }
}

/// Euclid's greatest common divisor (`gcd(0, w) = w`).
fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nginx's algorithm as written, one `current` per member.
    fn nginx(weights: &[u64], picks: usize) -> Vec<usize> {
        let total: i64 = weights.iter().map(|w| *w as i64).sum();
        let mut current = vec![0i64; weights.len()];
        (0..picks)
            .map(|_| {
                let mut best = 0;
                for i in 0..weights.len() {
                    current[i] += weights[i] as i64;
                    if current[i] > current[best] {
                        best = i;
                    }
                }
                current[best] -= total;
                best
            })
            .collect()
    }

    /// Picks, as positions: here each member's id is its position.
    fn schedule(weights: &[u64], picks: usize) -> Vec<usize> {
        let ids: Vec<u32> = (0..weights.len() as u32).collect();
        let mut s = Schedule::new(&ids, weights);
        (0..picks).map(|_| s.pick().unwrap() as usize).collect()
    }

    #[test]
    fn gives_nginx_sequence_exactly() {
        let cases: &[&[u64]] = &[
            &[5, 1, 1],
            &[1, 1, 6],
            &[100, 100, 600],
            &[3, 7, 3, 7, 1, 3],
            &[100, 150, 200, 100, 150, 200, 100],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            &[9, 9, 9, 9],
            // Periods too long to write out (2,000 and 2,047 picks): picked by class.
            &[1000, 999, 1],
            &[1024, 1023],
        ];
        for weights in cases {
            let total: u64 = weights.iter().sum();
            let picks = 3 * total as usize + 5;
            assert_eq!(
                schedule(weights, picks),
                nginx(weights, picks),
                "{weights:?}"
            );
        }
    }

    #[test]
    fn a_large_set_written_out_gives_nginx_sequence_too() {
        // 500 members of 100, 150 and 200: a period of 1,499 picks, past 1,024 and
        // written out at four a member. Three periods and more, against Nginx's rule.
        let weights: Vec<u64> = (0..500).map(|i| [100, 150, 200][i % 3]).collect();
        let ids: Vec<u32> = (0..weights.len() as u32).collect();
        assert_eq!(Schedule::new(&ids, &weights).period.len(), 1_499);
        let picks = 3 * 1_499 + 5;
        assert_eq!(schedule(&weights, picks), nginx(&weights, picks));
    }

    #[test]
    fn writes_out_only_periods_up_to_the_limit() {
        let period = |weights: &[u64]| {
            let ids: Vec<u32> = (0..weights.len() as u32).collect();
            Schedule::new(&ids, weights).period.len()
        };
        assert_eq!(period(&[100, 150, 200]), 9, "gcd 50: 2 + 3 + 4 picks");
        assert_eq!(period(&[100; 1024]), 1024, "equal weights: one pick each");
        assert_eq!(
            period(&[100; 1025]),
            1025,
            "past 1,024 picks, four a member"
        );
        assert_eq!(period(&[1000, 999, 1]), 0, "gcd 1: 2,000 picks");
        // 1,000 members of 100, 150 and 200 (gcd 50): 2,999 picks, under 4,000.
        let tiers: Vec<u64> = (0..1_000).map(|i| [100, 150, 200][i % 3]).collect();
        assert_eq!(period(&tiers), 2_999);
        // 400 members of 100 and one of 99 (gcd 1): 40,099 picks, past 1,604.
        let mut warming = vec![100; 400];
        warming.push(99);
        assert_eq!(period(&warming), 0);
        // Past 1,024 picks and under four a member, but nine classes: 1,000 members of 50
        // and one each of 100 to 450 (gcd 50, 1,044 picks) stay on the class path; with
        // eight classes (no 450: 1,035 picks) the period is written out.
        let classes = |top: u64| -> Vec<u64> {
            let mut w = vec![50; 1_000];
            w.extend((2..=top).map(|k| 50 * k));
            w
        };
        assert_eq!(period(&classes(9)), 0);
        assert_eq!(period(&classes(8)), 1_035);
        assert_eq!(period(&[0, 0]), 0, "no weight, nothing to pick");
    }

    #[test]
    fn is_smooth_and_exact_over_a_period() {
        // 5/1/1: Nginx's own example, `a a b a c a a` (never five a's in a row).
        assert_eq!(schedule(&[5, 1, 1], 7), vec![0, 0, 1, 0, 2, 0, 0]);
        let picks = schedule(&[100, 100, 600], 8_000);
        let count = |p: usize| picks.iter().filter(|x| **x == p).count();
        assert_eq!((count(0), count(1), count(2)), (1_000, 1_000, 6_000));
    }

    #[test]
    fn skips_zero_weights_and_has_nothing_without_weight() {
        let picks = schedule(&[0, 2, 0, 1], 6);
        assert_eq!(picks, vec![1, 3, 1, 1, 3, 1]);
        assert_eq!(Schedule::new(&[4, 9], &[0, 0]).pick(), None);
    }
}
