//! `consistent-hash`: calls with the same hash key (`CallOptions::hash_key` on the client)
//! go to the same endpoint for as long as it stays in the set, and when one of n endpoints
//! leaves, only its own keys (about 1/n of them) move — to the next endpoint on the ring,
//! which is also where a retry that excludes it lands. A ring of virtual nodes (Karger et
//! al.; Dubbo's and Nginx's `hash ... consistent`), their number proportional to each
//! endpoint's effective weight, see `ring`.
//!
//! Hash key 0 means "no key" (the client's default): such calls are spread by weight, as
//! a random point on the ring. Config: `virtual-nodes` (points per weight 100, default 160,
//! 1..=10000), `seed` (for the calls without a key).

mod ring;

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};
use axle_selector_weights::member_weights;
use ring::{Member, Ring};

/// The consistent-hash selector.
pub struct ConsistentHash {
    rng: Rng,
    virtual_nodes: u64,
}

impl Selector for ConsistentHash {
    /// The set's ring.
    type SetState = Ring;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["virtual-nodes", "seed"])?;
        let virtual_nodes = config.u64_or("virtual-nodes", 160)?;
        if !(1..=10_000).contains(&virtual_nodes) {
            return Err(format!(
                "`virtual-nodes` must be 1..=10000, not {virtual_nodes}"
            ));
        }
        Ok(ConsistentHash {
            rng: Rng::from_config(config)?,
            virtual_nodes,
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> Ring {
        let weights = member_weights(table, members);
        let members: Vec<Member> = members
            .iter()
            .zip(weights)
            .map(|(id, weight)| Member {
                address: table.get(*id).map_or("", |e| e.address.as_str()),
                id: *id,
                weight,
            })
            .collect();
        Ring::new(&members, self.virtual_nodes)
    }

    fn select(&mut self, set: &mut CandidateSet<Ring>, hash_key: u64) -> Option<EndpointId> {
        let key = if hash_key == 0 {
            self.rng.next_u64()
        } else {
            hash_key
        };
        set.state.owner(key)
    }
}

axle_sdk::export_selector!(ConsistentHash);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, Endpoint, SelectorRuntime};

    fn runtime(weights: &[u32]) -> SelectorRuntime<ConsistentHash> {
        let config = Config::from_pairs([("seed", ConfigValue::Int(1))]);
        let mut rt = SelectorRuntime::<ConsistentHash>::new(&config).unwrap();
        rt.endpoints_changed(EndpointTable::new(
            1,
            weights
                .iter()
                .enumerate()
                .map(|(i, w)| Endpoint {
                    id: i as u32,
                    address: format!("10.1.0.{i}:7300"),
                    weight: *w,
                    tags: vec![],
                })
                .collect(),
        ));
        rt
    }

    #[test]
    fn removing_one_of_ten_moves_only_its_own_keys() {
        let mut rt = runtime(&[100; 10]);
        rt.define_set(0, (0..10).collect());
        rt.define_set(1, (0..10).filter(|id| *id != 3).collect());
        let keys = 1..=10_000u64;
        let before: Vec<u32> = keys.clone().map(|k| rt.select(0, k).unwrap()).collect();
        let after: Vec<u32> = keys.map(|k| rt.select(1, k).unwrap()).collect();
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        let on_removed = before.iter().filter(|b| **b == 3).count();
        assert_eq!(moved, on_removed, "only the removed endpoint's keys move");
        assert!(
            (700..=1_300).contains(&moved),
            "{moved} of 10,000 keys moved"
        );
        assert!(after.iter().all(|a| *a != 3));
    }

    #[test]
    fn a_key_sticks_and_keys_spread_by_weight() {
        let mut rt = runtime(&[100, 100, 600]);
        rt.define_set(0, vec![0, 1, 2]);
        assert!((0..100).all(|_| rt.select(0, 42) == rt.select(0, 42)));
        let mut counts = [0u32; 3];
        for k in 1..=30_000u64 {
            counts[rt.select(0, k).unwrap() as usize] += 1;
        }
        // Ring arcs are uneven: within 5 points of 12.5 / 12.5 / 75 %.
        assert!((2_250..=5_250).contains(&counts[0]), "{counts:?}");
        assert!((21_000..=24_000).contains(&counts[2]), "{counts:?}");
        // Without a key, calls spread too.
        let unkeyed: std::collections::BTreeSet<u32> =
            (0..200).map(|_| rt.select(0, 0).unwrap()).collect();
        assert_eq!(unkeyed.len(), 3);
    }

    #[test]
    fn config_is_validated() {
        let bad = Config::from_pairs([("virtual-nodes", ConfigValue::Int(0))]);
        assert!(SelectorRuntime::<ConsistentHash>::new(&bad).is_err());
        let unknown = Config::from_pairs([("replicas", ConfigValue::Int(3))]);
        let err = SelectorRuntime::<ConsistentHash>::new(&unknown)
            .err()
            .unwrap();
        assert!(err.contains("unknown key `replicas`"), "{err}");
        testing::reset();
    }
}
