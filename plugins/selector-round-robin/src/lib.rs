//! `round-robin`: each candidate set keeps its own cursor, so every member gets its turn
//! in order, whatever other sets the kernel defines.

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Selector};

/// The round-robin selector.
pub struct RoundRobin;

impl Selector for RoundRobin {
    /// The index of the next member to pick.
    type SetState = usize;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(RoundRobin)
    }

    fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) -> usize {
        0
    }

    fn select(&mut self, set: &mut CandidateSet<usize>, _hash_key: u64) -> Option<EndpointId> {
        // A set's members never change (a new table redefines it with a fresh cursor), so
        // the cursor stays below their count and wraps with a compare, not a division.
        let pick = *set.members.get(set.state)?;
        set.state += 1;
        if set.state == set.members.len() {
            set.state = 0;
        }
        Some(pick)
    }
}

axle_sdk::export_selector!(RoundRobin);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, SelectorRuntime};

    #[test]
    fn visits_candidates_in_order() {
        let mut rt = SelectorRuntime::<RoundRobin>::new(&Config::default()).unwrap();
        rt.endpoints_changed(testing::table(5));
        rt.define_set(0, vec![4, 1, 3]);
        let picks: Vec<_> = (0..7).map(|_| rt.select(0, 0).unwrap()).collect();
        assert_eq!(picks, vec![4, 1, 3, 4, 1, 3, 4]);
        assert_eq!(rt.select(9, 0), None, "undefined set");
    }
}
