//! SHADOW: a candidate selector or router chain decides beside the live one on a sampled
//! share of calls (`shadow-selector`, `shadow-routers`, `shadow-sample`;
//! `docs/shadow.md`). Its answer is never used: the route stage asks the shadow routers
//! after the live candidates are known, the select stage asks the shadow selector after
//! the live pick is made, and each only compares. A shadow is a plugin of its own (the
//! manifest refuses one that fills a live slot), so its calls move no live state; its
//! faults are the plugin host's to count and contain, and here only count as a sampled
//! call without an answer. An unsampled call costs one comparison against a draw from
//! the thread's generator; a sampled one costs the shadow's plugin call.

use std::sync::Arc;

use axle_plugin_host::kinds::router::{RouteRequest, RouterPlugin};
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_plugin_host::shadow::{unix_ms, Divergence, FactsView, Sampler, ShadowCounters};

use super::route::Candidates;
use crate::state::ClientState;
use crate::Call;

/// A service's shadow slots, resolved with its loadout.
pub struct Shadows {
    /// One draw per call decides for the selector and the routers together.
    pub sampler: Sampler,
    pub selector: Option<(Arc<SelectorPlugin>, Arc<ShadowCounters>)>,
    pub routers: Option<(Vec<Arc<RouterPlugin>>, Arc<ShadowCounters>)>,
    /// The fields the shadow routers read together.
    pub route_fields: Vec<String>,
}

impl Shadows {
    /// The counters of each shadow, for the views.
    pub fn counters(&self) -> impl Iterator<Item = &Arc<ShadowCounters>> {
        let selector = self.selector.as_ref().map(|(_, c)| c);
        selector
            .into_iter()
            .chain(self.routers.as_ref().map(|(_, c)| c))
    }
}

/// The shadows of this call when it is sampled (none otherwise, or without shadows).
#[inline]
pub fn sampled(shadows: &Option<Arc<Shadows>>) -> Option<Arc<Shadows>> {
    match shadows {
        Some(s) if s.sampler.hit() => Some(s.clone()),
        _ => None,
    }
}

/// The shadow routers' candidates for `call` beside the live ones: the same rotation, the
/// request with every part a router may read (each router is handed only what it
/// declared). Compared as sets.
pub fn route(
    state: &ClientState,
    call: &Call<'_>,
    shadows: &Shadows,
    rotation: &[u32],
    live: &Candidates,
) {
    let Some((routers, counters)) = &shadows.routers else {
        return;
    };
    let (svc, options) = (call.svc, call.options);
    let request = RouteRequest {
        service: svc.name.clone(),
        method: call.method.to_string(),
        tags: options.tags.clone(),
        consumer_app: options
            .consumer_app
            .as_deref()
            .or(svc.consumer_app.as_deref())
            .unwrap_or("")
            .to_string(),
        caller_address: svc.caller_address.load().to_string(),
        fields: super::route_fields::of(state, call, &shadows.route_fields),
    };
    let mut left = rotation.to_vec();
    for router in routers {
        let routed = router.route(&left, &request);
        if !routed.by_plugin {
            counters.faulted();
            return;
        }
        left = routed.endpoints;
    }
    let mut wanted = live.members().to_vec();
    wanted.sort_unstable();
    left.sort_unstable();
    if left == wanted {
        counters.agreed();
        return;
    }
    counters.diverged(|| Divergence {
        at_unix_ms: unix_ms(),
        live: describe_set(state, &wanted),
        candidate: describe_set(state, &left),
        live_facts: None,
        candidate_facts: None,
    });
}

/// The shadow selector's pick among the candidates the live one picked `picked` from.
pub fn select(
    state: &ClientState,
    shadows: &Shadows,
    candidates: &Candidates,
    hash_key: u64,
    picked: u32,
) {
    let Some((selector, counters)) = &shadows.selector else {
        return;
    };
    // The rotation's set is defined in every selector of the loadout when the rotation
    // is made; a routed subset is interned here (a lookup, and a definition the first
    // time the shadow meets that subset).
    let set = candidates
        .whole_rotation()
        .then(|| candidates.rotation.set_in(selector))
        .flatten()
        .unwrap_or_else(|| selector.intern_set(candidates.members()));
    let chosen = match selector.select(set, hash_key) {
        Some(s) if s.by_plugin => s.endpoint,
        _ => {
            counters.faulted();
            return;
        }
    };
    if chosen == picked {
        counters.agreed();
        return;
    }
    counters.diverged(|| Divergence {
        at_unix_ms: unix_ms(),
        live: address(state, picked),
        candidate: address(state, chosen),
        live_facts: facts(state, picked),
        candidate_facts: facts(state, chosen),
    });
}

fn address(state: &ClientState, id: u32) -> String {
    state
        .endpoint(id)
        .map_or_else(|| format!("#{id}"), |ep| ep.spec.load().address.clone())
}

fn facts(state: &ClientState, id: u32) -> Option<FactsView> {
    let ep = state.endpoint(id)?;
    let address = ep.spec.load().address.clone();
    Some(FactsView::of(&address, &ep.cell.snapshot()))
}

/// A candidate set for people: its size and its first few addresses.
fn describe_set(state: &ClientState, ids: &[u32]) -> String {
    const SHOWN: usize = 4;
    let names: Vec<String> = ids
        .iter()
        .take(SHOWN)
        .map(|id| address(state, *id))
        .collect();
    let more = match ids.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" +{n}"),
    };
    format!("{} endpoint(s): [{}{more}]", ids.len(), names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shadows(rate: f64) -> Option<Arc<Shadows>> {
        Some(Arc::new(Shadows {
            sampler: Sampler::new(rate),
            selector: None,
            routers: None,
            route_fields: Vec::new(),
        }))
    }

    #[test]
    fn only_sampled_calls_get_the_shadows() {
        assert!(sampled(&None).is_none());
        assert!((0..1_000).all(|_| sampled(&shadows(1.0)).is_some()));
        assert!((0..1_000).all(|_| sampled(&shadows(0.0)).is_none()));
    }
}
