//! `smooth-weighted`: Nginx's smooth weighted round-robin over the endpoints' *effective*
//! weights (configured × warm-up × health factor), the default selector. Each member gets
//! exactly its weight's share of every period of picks, spread out rather than in bursts
//! (5/1/1 gives `a a b a c a a`); equal weights give plain round-robin in member order.
//!
//! Weights come from the endpoint table, which the kernel republishes when an effective
//! weight moves by more than a tenth (then redefines every set): no host call per pick. A
//! pick reads the set's period of picks when it is short (equal weights: one per member),
//! else costs O(distinct weights in the set), see `axle_selector_weights::Schedule`. No
//! config keys.

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Selector};
use axle_selector_weights::{member_weights, Schedule};

/// The smooth weighted round-robin selector.
pub struct SmoothWeighted;

impl Selector for SmoothWeighted {
    /// Nginx's state for the set, by weight class.
    type SetState = Schedule;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(SmoothWeighted)
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> Schedule {
        Schedule::new(members, &member_weights(table, members))
    }

    fn select(&mut self, set: &mut CandidateSet<Schedule>, _hash_key: u64) -> Option<EndpointId> {
        set.state.pick()
    }
}

axle_sdk::export_selector!(SmoothWeighted);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::testing::{self, weighted_table as weighted};
    use axle_sdk::SelectorRuntime;

    fn counts(rt: &mut SelectorRuntime<SmoothWeighted>, n: usize, picks: usize) -> Vec<usize> {
        let mut counts = vec![0; n];
        for _ in 0..picks {
            counts[rt.select(0, 0).unwrap() as usize] += 1;
        }
        counts
    }

    #[test]
    fn equal_weights_are_round_robin_in_member_order() {
        let mut rt = SelectorRuntime::<SmoothWeighted>::new(&Config::default()).unwrap();
        rt.endpoints_changed(testing::table(5));
        rt.define_set(0, vec![4, 1, 3]);
        let picks: Vec<_> = (0..7).map(|_| rt.select(0, 0).unwrap()).collect();
        assert_eq!(picks, vec![4, 1, 3, 4, 1, 3, 4]);
        assert_eq!(rt.select(9, 0), None, "undefined set");
    }

    #[test]
    fn shares_follow_the_weights_and_a_new_table() {
        let mut rt = SelectorRuntime::<SmoothWeighted>::new(&Config::default()).unwrap();
        rt.endpoints_changed(weighted(&[100, 100, 600]));
        rt.define_set(0, vec![0, 1, 2]);
        assert_eq!(counts(&mut rt, 3, 8_000), vec![1_000, 1_000, 6_000]);
        // Endpoint 2 demoted by its health factor to 200: the kernel pushes a new table and
        // redefines the set; the shares follow at once.
        rt.endpoints_changed(weighted(&[100, 100, 200]));
        rt.define_set(0, vec![0, 1, 2]);
        assert_eq!(counts(&mut rt, 3, 4_000), vec![1_000, 1_000, 2_000]);
    }

    #[test]
    fn zero_weights_are_skipped_unless_all_are_zero() {
        let mut rt = SelectorRuntime::<SmoothWeighted>::new(&Config::default()).unwrap();
        rt.endpoints_changed(weighted(&[0, 100, 0]));
        rt.define_set(0, vec![0, 1, 2]);
        assert_eq!(counts(&mut rt, 3, 30), vec![0, 30, 0]);
        rt.endpoints_changed(weighted(&[0, 0, 0]));
        rt.define_set(0, vec![0, 1, 2]);
        assert_eq!(counts(&mut rt, 3, 30), vec![10, 10, 10]);
    }

    #[test]
    fn refuses_unknown_config() {
        let config = Config::from_pairs([("speed", axle_sdk::ConfigValue::Int(1))]);
        let err = SelectorRuntime::<SmoothWeighted>::new(&config)
            .err()
            .unwrap();
        assert!(err.contains("unknown key `speed`"), "{err}");
    }
}
