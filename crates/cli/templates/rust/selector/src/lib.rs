//! `{{name}}`: a round-robin selector. Each candidate set keeps its own cursor, so every
//! member gets its turn in order. The SDK's runtime keeps the table and the sets, and
//! calls `select` only for a defined, non-empty set.
//!
//! Config: none (any key is refused, so a typo in the manifest fails the load).

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Selector};

/// The selector; all its state is per set.
pub struct RoundRobin;

impl Selector for RoundRobin {
    /// The set's cursor.
    type SetState = usize;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(RoundRobin)
    }

    fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) -> usize {
        0
    }

    fn select(&mut self, set: &mut CandidateSet<usize>, _hash_key: u64) -> Option<EndpointId> {
        let pick = set.members[set.state % set.members.len()];
        set.state = set.state.wrapping_add(1);
        Some(pick)
    }
}

axle_sdk::export_selector!(RoundRobin);
