//! `weighted-random`: picks a member with probability proportional to its weight (Dubbo's
//! default). Prefix sums are built when a set is defined, so a pick is one random number
//! and a binary search — O(log n), no per-call copy of the table. Config: `seed`.

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};

/// The weighted random selector.
pub struct WeightedRandom {
    rng: Rng,
}

/// Cumulative weights of a set's members, in member order.
pub struct Prefix {
    cumulative: Vec<u64>,
}

impl Selector for WeightedRandom {
    type SetState = Prefix;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed"])?;
        Ok(WeightedRandom {
            rng: Rng::from_config(config)?,
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> Prefix {
        let mut total = 0u64;
        let cumulative = members
            .iter()
            .map(|id| {
                total += table.get(*id).map_or(0, |e| u64::from(e.weight));
                total
            })
            .collect();
        Prefix { cumulative }
    }

    fn select(&mut self, set: &mut CandidateSet<Prefix>, _hash_key: u64) -> Option<EndpointId> {
        let total = *set.state.cumulative.last()?;
        if total == 0 {
            // Every weight is zero: no preference, so uniform.
            let i = self.rng.below(set.members.len() as u64) as usize;
            return Some(set.members[i]);
        }
        let ticket = self.rng.below(total);
        let i = set.state.cumulative.partition_point(|&c| c <= ticket);
        set.members.get(i).copied()
    }
}

axle_sdk::export_selector!(WeightedRandom);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{ConfigValue, SelectorRuntime};

    #[test]
    fn follows_the_weights_within_three_percent() {
        let weights = [100u32, 300, 600, 0];
        let table = axle_sdk::testing::weighted_table(&weights);
        let config = Config::from_pairs([("seed", ConfigValue::Int(7))]);
        let mut rt = SelectorRuntime::<WeightedRandom>::new(&config).unwrap();
        rt.endpoints_changed(table);
        rt.define_set(0, vec![0, 1, 2, 3]);
        let mut counts = [0f64; 4];
        let n = 100_000;
        for _ in 0..n {
            counts[rt.select(0, 0).unwrap() as usize] += 1.0;
        }
        for (i, w) in weights.iter().enumerate() {
            let expected = f64::from(*w) / 1000.0;
            let got = counts[i] / f64::from(n);
            assert!(
                (got - expected).abs() <= 0.03 * expected.max(0.01),
                "{i}: {got} vs {expected}"
            );
        }
        assert_eq!(counts[3], 0.0, "a zero weight is never picked");
    }
}
