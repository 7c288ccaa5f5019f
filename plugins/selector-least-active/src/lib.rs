//! `least-active`: power of two choices on load per weight. Draws two distinct members by
//! weight and has the kernel keep the one with fewer requests in flight per unit of
//! effective weight; on a tie, the first draw, so an idle set is served in proportion to
//! the weights. A two-choice selector: the kernel compares the counts it keeps, so a pick
//! makes no host call whatever the set size (it used to read every member: O(set) per
//! pick, 648 µs at 10,000 endpoints; then two host calls). Mitzenmacher's result is why
//! two are enough: the most loaded endpoint's excess drops from log n / log log n to
//! log log n. Config: `seed`.

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, LoadMeasure, Rng, Selector};
use axle_selector_weights::WeightedSet;

/// The least-active selector.
pub struct LeastActive {
    rng: Rng,
}

impl Selector for LeastActive {
    /// The set's weights, sampled in O(1).
    type SetState = WeightedSet;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed"])?;
        Ok(LeastActive {
            rng: Rng::from_config(config)?,
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> WeightedSet {
        WeightedSet::new(table, members)
    }

    /// In flight per unit of weight.
    fn measure(&self) -> Option<LoadMeasure> {
        Some(LoadMeasure {
            per_weight: true,
            ..LoadMeasure::default()
        })
    }

    fn select_two(
        &mut self,
        set: &mut CandidateSet<WeightedSet>,
        _hash_key: u64,
    ) -> Option<(EndpointId, EndpointId)> {
        axle_selector_weights::two_by_weight(set, &mut self.rng)
    }
}

axle_sdk::export_selector!(LeastActive);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, EndpointFacts, SelectorRuntime};

    fn weighted(weights: &[u32]) -> EndpointTable {
        axle_sdk::testing::weighted_table(weights)
    }

    /// What the kernel would say of endpoint `id` of effective weight `weight`.
    fn busy(id: u32, in_flight: u32, weight: u32) {
        testing::set_facts(
            id,
            EndpointFacts {
                in_flight,
                weight,
                ..Default::default()
            },
        );
    }

    fn runtime(weights: &[u32]) -> SelectorRuntime<LeastActive> {
        let config = Config::from_pairs([("seed", ConfigValue::Int(5))]);
        let mut rt = SelectorRuntime::<LeastActive>::new(&config).unwrap();
        rt.endpoints_changed(weighted(weights));
        rt.define_set(0, (0..weights.len() as u32).collect());
        rt
    }

    fn counts(rt: &mut SelectorRuntime<LeastActive>, n: usize, picks: u32) -> Vec<u32> {
        let mut counts = vec![0; n];
        for _ in 0..picks {
            counts[rt.select(0, 0).unwrap() as usize] += 1;
        }
        counts
    }

    #[test]
    fn the_busiest_loses_every_duel_and_the_idle_wins_every_one() {
        testing::reset();
        for (id, in_flight) in [(0, 5), (1, 0), (2, 3)] {
            busy(id, in_flight, 100);
        }
        let mut rt = runtime(&[100; 3]);
        let c = counts(&mut rt, 3, 3_000);
        // Pairs are uniform: 1 is in two pairs of three and wins both, 2 wins against 0.
        assert_eq!(c[0], 0, "{c:?}");
        assert!((1_900..2_100).contains(&c[1]), "{c:?}");
        assert_eq!(c[1] + c[2], 3_000);
    }

    #[test]
    fn an_idle_set_is_served_by_weight() {
        testing::reset();
        let mut rt = runtime(&[100, 100, 600]);
        let c = counts(&mut rt, 3, 8_000);
        // 12.5 / 12.5 / 75 %, within 3 points.
        assert!((760..1_240).contains(&c[0]), "{c:?}");
        assert!((760..1_240).contains(&c[1]), "{c:?}");
        assert!((5_760..6_240).contains(&c[2]), "{c:?}");
    }

    #[test]
    fn load_is_compared_per_unit_of_weight() {
        testing::reset();
        // 3 in flight on weight 600 is less loaded than 1 on weight 100.
        busy(0, 1, 100);
        busy(1, 3, 600);
        let mut rt = runtime(&[100, 600]);
        assert_eq!(counts(&mut rt, 2, 1_000), vec![0, 1_000]);
        rt.define_set(1, vec![0]);
        assert_eq!(rt.select(1, 0), Some(0), "a single member is always picked");
    }
}
