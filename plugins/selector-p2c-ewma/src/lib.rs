//! `p2c-ewma`: power of two choices (Mitzenmacher; Finagle's and linkerd's default). Draws
//! two distinct members by effective weight and keeps the cheaper, where cost = latency
//! EWMA × (1 + in-flight × mean weight / weight), from the kernel's facts: the in-flight
//! count is read per unit of weight, so an endpoint of twice the weight may carry twice
//! the requests at the same cost (with equal weights this is the classic latency ×
//! (in-flight + 1)). On a tie, the first draw: an idle set of equal latencies is served in
//! proportion to the weights. A two-choice selector: the kernel computes the costs from the
//! facts it keeps, so a pick makes no host call whatever the set size. Config: `seed`,
//! `default-latency-us` (cost of a never-measured endpoint; low, so new endpoints get
//! probed — default 1000).

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, LoadMeasure, Rng, Selector};
use axle_selector_weights::WeightedSet;

/// The P2C selector.
pub struct P2cEwma {
    rng: Rng,
    default_latency_ns: u64,
}

impl Selector for P2cEwma {
    /// The set's weights, sampled in O(1).
    type SetState = WeightedSet;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed", "default-latency-us"])?;
        Ok(P2cEwma {
            rng: Rng::from_config(config)?,
            default_latency_ns: config
                .u64_or("default-latency-us", 1000)?
                .saturating_mul(1000),
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> WeightedSet {
        WeightedSet::new(table, members)
    }

    /// Latency × (in flight per unit of weight + 1).
    fn measure(&self) -> Option<LoadMeasure> {
        Some(LoadMeasure {
            per_weight: true,
            latency: true,
            default_latency_ns: self.default_latency_ns,
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

axle_sdk::export_selector!(P2cEwma);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, EndpointFacts, SelectorRuntime};

    #[test]
    fn avoids_the_slow_endpoint() {
        testing::reset();
        let slow = EndpointFacts {
            ewma_latency_ns: 50_000_000,
            ..Default::default()
        };
        let fast = EndpointFacts {
            ewma_latency_ns: 1_000_000,
            ..Default::default()
        };
        testing::set_facts(0, slow);
        testing::set_facts(1, fast);
        testing::set_facts(2, fast);
        let mut rt = SelectorRuntime::<P2cEwma>::new(&Config::default()).unwrap();
        rt.endpoints_changed(testing::table(3));
        rt.define_set(0, vec![0, 1, 2]);
        let slow_picks = (0..3000).filter(|_| rt.select(0, 0) == Some(0)).count();
        // The two choices are distinct, so the slow endpoint loses every duel it is in.
        assert_eq!(slow_picks, 0);
        rt.define_set(1, vec![0]);
        assert_eq!(rt.select(1, 0), Some(0), "a single member is always picked");
    }

    #[test]
    fn equal_costs_share_by_weight_and_weight_offsets_cost() {
        testing::reset();
        let table = |weights: &[u32]| axle_sdk::testing::weighted_table(weights);
        let config = Config::from_pairs([("seed", axle_sdk::ConfigValue::Int(9))]);
        let mut rt = SelectorRuntime::<P2cEwma>::new(&config).unwrap();
        rt.endpoints_changed(table(&[100, 100, 600]));
        rt.define_set(0, vec![0, 1, 2]);
        let mut counts = [0u32; 3];
        for _ in 0..8_000 {
            counts[rt.select(0, 0).unwrap() as usize] += 1;
        }
        // No facts yet: every cost is equal, the first (weighted) draw wins: 12.5/12.5/75 %.
        assert!((760..1_240).contains(&counts[0]), "{counts:?}");
        assert!((5_760..6_240).contains(&counts[2]), "{counts:?}");
        // In flight is counted per unit of weight: 5 on weight 600 (mean weight 350) costs
        // 1 + 5 × 350/600 = 3.9 latencies, 1 on weight 100 costs 1 + 3.5 = 4.5.
        // The weights are the kernel's effective weights, as `host::facts` gives them.
        let busy = |in_flight, weight| EndpointFacts {
            ewma_latency_ns: 1_000_000,
            in_flight,
            weight,
            ..Default::default()
        };
        testing::set_facts(0, busy(1, 100));
        testing::set_facts(1, busy(5, 600));
        rt.endpoints_changed(table(&[100, 600]));
        rt.define_set(0, vec![0, 1]);
        assert!((0..1_000).all(|_| rt.select(0, 0) == Some(1)));
        // 7 on weight 600 costs 5.08: now the light endpoint wins.
        testing::set_facts(1, busy(7, 600));
        assert!((0..1_000).all(|_| rt.select(0, 0) == Some(0)));
    }
}
