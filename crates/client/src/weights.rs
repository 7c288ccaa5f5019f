//! Endpoint weight overrides (`[services.<s>.weights]`, a run-time rule's `[weights]`):
//! the weight an endpoint takes whatever discovery says. Applied when endpoints arrive
//! (`ClientState::set_endpoints`) and again on every swap, before the new table is
//! published, so a pushed weight reshapes shares from the next table on.
//!
//! An endpoint is one provider process, usually serving several services, and its weight
//! is the endpoint's (one facts cell, one entry in the table every selector sees): an
//! override written under any service applies to that address for all of them. Two
//! services giving one address different overrides: the larger wins.

use std::collections::BTreeMap;

use axle_manifest::{EndpointSpec, Manifest};

use crate::state::ClientState;

/// Every service's overrides by address (the larger where two services disagree).
pub fn overrides(manifest: &Manifest) -> BTreeMap<&str, u32> {
    let mut all: BTreeMap<&str, u32> = BTreeMap::new();
    for (address, weight) in manifest.weight_overrides.values().flatten() {
        let w = all.entry(address.as_str()).or_insert(*weight);
        *w = (*w).max(*weight);
    }
    all
}

/// The weight `spec` takes under `overrides` ([`overrides`]).
pub fn effective(spec: &EndpointSpec, overrides: &BTreeMap<&str, u32>) -> u32 {
    overrides
        .get(spec.address.as_str())
        .copied()
        .unwrap_or(spec.weight)
}

/// Sets every endpoint's configured weight from `manifest` (an override, else what
/// discovery gave). The caller publishes the table afterwards.
pub fn reapply(state: &ClientState, manifest: &Manifest) {
    let overrides = overrides(manifest);
    for ep in state.all_endpoints() {
        ep.cell.set_weight(effective(&ep.spec.load(), &overrides));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_wins_over_discovery_for_its_address_only() {
        let spec = |a: &str| EndpointSpec {
            weight: 100,
            ..EndpointSpec::new(a)
        };
        let mut m = Manifest::embedded().expect("embedded manifest");
        let w = |pairs: &[(&str, u32)]| {
            pairs
                .iter()
                .map(|(a, w)| (a.to_string(), *w))
                .collect::<BTreeMap<_, _>>()
        };
        m.weight_overrides
            .insert("echo".into(), w(&[("127.0.0.1:2", 25), ("127.0.0.1:4", 7)]));
        m.weight_overrides
            .insert("kv".into(), w(&[("127.0.0.1:4", 9)]));
        let o = overrides(&m);
        assert_eq!(effective(&spec("127.0.0.1:2"), &o), 25);
        assert_eq!(effective(&spec("127.0.0.1:3"), &o), 100);
        assert_eq!(effective(&spec("127.0.0.1:4"), &o), 9, "the larger of two");
        assert_eq!(effective(&spec("127.0.0.1:2"), &BTreeMap::new()), 100);
    }
}
