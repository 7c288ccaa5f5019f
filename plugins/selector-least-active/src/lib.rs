//! `least-active`: the member with the fewest requests in flight, as the kernel counts them
//! (`host::in_flight`); ties are broken at random so equal endpoints share the load. Reads one
//! fact per member, so a pick is O(set size): meant for sets of tens, not thousands.
//! Config: `seed`.

use axle_sdk::{host, CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};

/// The least-active selector.
pub struct LeastActive {
    rng: Rng,
}

impl Selector for LeastActive {
    type SetState = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed"])?;
        Ok(LeastActive {
            rng: Rng::from_config(config)?,
        })
    }

    fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) {}

    fn select(&mut self, set: &mut CandidateSet<()>, _hash_key: u64) -> Option<EndpointId> {
        let mut best = None;
        let mut best_active = u32::MAX;
        let mut ties = 0u64;
        for &id in &set.members {
            let active = host::in_flight(id);
            if active < best_active {
                best_active = active;
                best = Some(id);
                ties = 1;
            } else if active == best_active {
                // Reservoir sampling: each tied member ends up chosen with equal odds.
                ties += 1;
                if self.rng.below(ties) == 0 {
                    best = Some(id);
                }
            }
        }
        best
    }
}

axle_sdk::export_selector!(LeastActive);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, EndpointFacts, SelectorRuntime};

    #[test]
    fn prefers_the_idle_endpoint() {
        testing::reset();
        for (id, in_flight) in [(0, 5), (1, 0), (2, 3)] {
            testing::set_facts(
                id,
                EndpointFacts {
                    in_flight,
                    ..Default::default()
                },
            );
        }
        let mut rt = SelectorRuntime::<LeastActive>::new(&Config::default()).unwrap();
        rt.endpoints_changed(testing::table(3));
        rt.define_set(0, vec![0, 1, 2]);
        assert!((0..100).all(|_| rt.select(0, 0) == Some(1)));
        // Two idle endpoints share the picks.
        testing::set_facts(2, EndpointFacts::default());
        let ones = (0..1000).filter(|_| rt.select(0, 0) == Some(1)).count();
        assert!((350..650).contains(&ones), "{ones}");
    }
}
