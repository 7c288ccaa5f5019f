//! What the weight-aware selectors share: the weights of a candidate set, read once when
//! the set is defined, an alias table that samples them in O(1), and Nginx's smooth
//! weighted round-robin schedule (`smooth-weighted`'s, also `zone-aware`'s within a zone).
//!
//! Why the table's weights are enough: the kernel publishes each endpoint's *effective*
//! weight (configured × warm-up × health factor) in the endpoint table, and publishes a new
//! table (after which it redefines every set) whenever one of them moves by more than a
//! tenth. A selector that derives its per-set state from the table therefore follows warm-up
//! and health without a host call per member per pick.

mod alias;
mod sampling;
mod schedule;

pub use alias::AliasTable;
pub use sampling::{two_by_weight, WeightedSet};
pub use schedule::Schedule;

use axle_sdk::{EndpointId, EndpointTable};

/// The weight of each member, in member order, as the table gives it (0 for an id missing
/// from the table). When every weight is 0 there is no preference: each member counts 1, so
/// a set of drained endpoints is still served evenly rather than not at all.
pub fn member_weights(table: &EndpointTable, members: &[EndpointId]) -> Vec<u64> {
    let weights: Vec<u64> = members
        .iter()
        .map(|id| table.get(*id).map_or(0, |e| u64::from(e.weight)))
        .collect();
    if weights.iter().all(|w| *w == 0) {
        return vec![1; members.len()];
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(weights: &[u32]) -> EndpointTable {
        axle_sdk::testing::weighted_table(weights)
    }

    #[test]
    fn reads_weights_in_member_order_and_treats_all_zero_as_even() {
        let t = table(&[100, 0, 600]);
        assert_eq!(member_weights(&t, &[2, 0, 1, 9]), vec![600, 100, 0, 0]);
        let drained = table(&[0, 0]);
        assert_eq!(member_weights(&drained, &[1, 0]), vec![1, 1]);
    }
}
