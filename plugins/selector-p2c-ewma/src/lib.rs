//! `p2c-ewma`: power of two choices (Mitzenmacher; Finagle's and linkerd's default). Picks
//! two distinct members at random and keeps the cheaper, where cost = latency EWMA ×
//! (in-flight + 1), both from the kernel's facts. O(1) per pick whatever the set size.
//! Config: `seed`, `default-latency-us` (cost of a never-measured endpoint; low, so new
//! endpoints get probed — default 1000).

use axle_sdk::{host, CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};

/// The P2C selector.
pub struct P2cEwma {
    rng: Rng,
    default_latency_ns: u64,
}

impl P2cEwma {
    fn cost(&self, id: EndpointId) -> u128 {
        let facts = host::facts(id).unwrap_or_default();
        let latency = if facts.ewma_latency_ns == 0 {
            self.default_latency_ns
        } else {
            facts.ewma_latency_ns
        };
        u128::from(latency) * (u128::from(facts.in_flight) + 1)
    }
}

impl Selector for P2cEwma {
    type SetState = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed", "default-latency-us"])?;
        Ok(P2cEwma {
            rng: Rng::from_config(config)?,
            default_latency_ns: config
                .u64_or("default-latency-us", 1000)?
                .saturating_mul(1000),
        })
    }

    fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) {}

    fn select(&mut self, set: &mut CandidateSet<()>, _hash_key: u64) -> Option<EndpointId> {
        let n = set.members.len() as u64;
        if n == 1 {
            return Some(set.members[0]);
        }
        let a = self.rng.below(n);
        // A second index distinct from the first.
        let b = (a + 1 + self.rng.below(n - 1)) % n;
        let (a, b) = (set.members[a as usize], set.members[b as usize]);
        Some(if self.cost(a) <= self.cost(b) { a } else { b })
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
}
