//! Endpoint weight overrides (`[services.<s>.weights]`, a run-time rule's `[weights]`):
//! the weight an endpoint takes whatever discovery says. Applied when endpoints arrive
//! (`ClientState::set_endpoints`) and again on every swap, before the new table is
//! published, so a pushed weight reshapes shares from the next table on. An address that
//! two services share takes the override of the service applied last.

use std::collections::BTreeMap;

use axle_manifest::{EndpointSpec, Manifest};

use crate::state::ClientState;

/// The weight `spec` takes under `overrides` (one service's table).
pub fn effective(spec: &EndpointSpec, overrides: Option<&BTreeMap<String, u32>>) -> u32 {
    overrides
        .and_then(|o| o.get(&spec.address))
        .copied()
        .unwrap_or(spec.weight)
}

/// Sets every member endpoint's configured weight from `manifest` (an override, else what
/// discovery gave). The caller publishes the table afterwards.
pub fn reapply(state: &ClientState, manifest: &Manifest) {
    for (name, svc) in &state.services {
        let overrides = manifest.weight_overrides.get(name);
        for id in svc.members.load().iter() {
            if let Some(ep) = state.endpoint(*id) {
                ep.cell.set_weight(effective(&ep.spec.load(), overrides));
            }
        }
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
        let overrides = BTreeMap::from([("127.0.0.1:2".to_string(), 25)]);
        assert_eq!(effective(&spec("127.0.0.1:2"), Some(&overrides)), 25);
        assert_eq!(effective(&spec("127.0.0.1:3"), Some(&overrides)), 100);
        assert_eq!(effective(&spec("127.0.0.1:2"), None), 100);
    }
}
