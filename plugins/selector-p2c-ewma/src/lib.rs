//! `p2c-ewma`: power of two choices (Mitzenmacher; Finagle's and linkerd's default). Draws
//! two distinct members by effective weight and keeps the cheaper, where cost = latency
//! EWMA × (1 + in-flight × mean weight / weight), from the kernel's facts: the in-flight
//! count is read per unit of weight, so an endpoint of twice the weight may carry twice
//! the requests at the same cost (with equal weights this is the classic latency ×
//! (in-flight + 1)). On a tie, the first draw: an idle set of equal latencies is served in
//! proportion to the weights. Two host calls per pick whatever the set size. Config: `seed`, `default-latency-us` (cost of a
//! never-measured endpoint; low, so new endpoints get probed — default 1000).

use axle_sdk::{host, CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};
use axle_selector_weights::WeightedSet;

/// The P2C selector.
pub struct P2cEwma {
    rng: Rng,
    default_latency_ns: u64,
    /// The draws of the current pick (kept to not allocate per pick).
    drawn: Vec<usize>,
}

impl P2cEwma {
    /// The expected cost of one more request at the member at `position`.
    fn cost(&self, set: &CandidateSet<WeightedSet>, position: usize) -> f64 {
        let facts = host::facts(set.members[position]).unwrap_or_default();
        let latency = if facts.ewma_latency_ns == 0 {
            self.default_latency_ns
        } else {
            facts.ewma_latency_ns
        };
        // Drawn members have a weight above 0.
        let weight = set.state.weight(position).max(1) as f64;
        let load = f64::from(facts.in_flight) * set.state.mean_weight() / weight;
        latency as f64 * (1.0 + load)
    }
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
            drawn: Vec::with_capacity(2),
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> WeightedSet {
        WeightedSet::new(table, members)
    }

    fn select(
        &mut self,
        set: &mut CandidateSet<WeightedSet>,
        _hash_key: u64,
    ) -> Option<EndpointId> {
        set.state.distinct(&mut self.rng, 2, &mut self.drawn);
        let (&a, b) = self.drawn.split_first()?;
        let Some(&b) = b.first() else {
            return set.members.get(a).copied();
        };
        let keep_a = self.cost(set, a) <= self.cost(set, b);
        set.members.get(if keep_a { a } else { b }).copied()
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
        let busy = |in_flight| EndpointFacts {
            ewma_latency_ns: 1_000_000,
            in_flight,
            ..Default::default()
        };
        testing::set_facts(0, busy(1));
        testing::set_facts(1, busy(5));
        rt.endpoints_changed(table(&[100, 600]));
        rt.define_set(0, vec![0, 1]);
        assert!((0..1_000).all(|_| rt.select(0, 0) == Some(1)));
        // 7 on weight 600 costs 5.08: now the light endpoint wins.
        testing::set_facts(1, busy(7));
        assert!((0..1_000).all(|_| rt.select(0, 0) == Some(0)));
    }
}
