//! The router slot (ROUTE = FILTER). Safe default: no filtering (the candidates as given).

use std::sync::Arc;

use crate::bindings::wit;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;

pub use axle_spi::RouteRequest;

crate::kinds::world_kind!(RouterKind, router, Router, RouterPre, "router world");

struct Member {
    inst: Instance<RouterKind>,
    table: Option<Arc<wit::EndpointTable>>,
    /// Bumped whenever the state a replacement must replay changes.
    generation: u64,
}

impl Member {
    fn ensure(&mut self) -> Result<(), Fault> {
        if self.inst.is_live() {
            return Ok(());
        }
        let table = self.table.clone();
        self.inst
            .ensure(self.generation, move |bindings, store| match &table {
                Some(t) => bindings.call_endpoints_changed(store, t),
                None => Ok(()),
            })
    }
}

/// The answer of [`RouterPlugin::route`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    /// The candidates left (a subset of those given).
    pub endpoints: Vec<u32>,
    /// `false` when the plugin failed and nothing was filtered.
    pub by_plugin: bool,
}

/// A loaded router.
pub struct RouterPlugin {
    pool: Pool<Member>,
}

impl RouterPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    pub(crate) fn new(instances: Vec<Instance<RouterKind>>) -> Self {
        let owner = instances[0].pool_owner();
        RouterPlugin {
            pool: Pool::new(
                instances
                    .into_iter()
                    .map(|inst| Member {
                        inst,
                        table: None,
                        generation: 0,
                    })
                    .collect(),
                owner,
            ),
        }
    }

    /// Pushes a new endpoint table to every instance.
    pub fn endpoints_changed(&self, table: &axle_spi::EndpointTable) {
        let table = Arc::new(crate::convert::table(table));
        self.pool.each(|member| {
            member.table = Some(table.clone());
            member.generation += 1;
            if member.ensure().is_ok() {
                let _ = member.inst.call("endpoints-changed", |b, s| {
                    b.call_endpoints_changed(s, &table)
                });
            }
        });
    }

    /// Narrows `candidates` for `request`. The answer must be a subset of the candidates:
    /// no stranger, no duplicate, so never longer than what was given; anything else is
    /// an invalid answer (counted) and nothing is filtered.
    pub fn route(&self, candidates: &[u32], request: &RouteRequest) -> Routed {
        let request = &crate::convert::route_request(request);
        self.pool
            .with(|member| {
                let answer = match member.ensure() {
                    Ok(()) => member
                        .inst
                        .call("route", |b, s| b.call_route(s, candidates, request)),
                    Err(fault) => Err(fault),
                };
                match answer {
                    Ok(endpoints) => match check_subset(candidates, &endpoints) {
                        Ok(()) => Routed {
                            endpoints,
                            by_plugin: true,
                        },
                        Err(why) => {
                            member.inst.fault("route", &Fault::Invalid(why));
                            unfiltered(candidates)
                        }
                    },
                    Err(_) => unfiltered(candidates),
                }
            })
            .unwrap_or_else(|_| unfiltered(candidates))
    }
}

/// Whether `answer` is a subset of `candidates` (each at most once).
fn check_subset(candidates: &[u32], answer: &[u32]) -> Result<(), String> {
    if answer.len() > candidates.len() {
        return Err(format!(
            "{} endpoints answered for {} candidates",
            answer.len(),
            candidates.len()
        ));
    }
    let mut allowed = candidates.to_vec();
    allowed.sort_unstable();
    let mut seen = answer.to_vec();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("endpoint {} answered twice", w[0]));
    }
    match seen.iter().find(|id| allowed.binary_search(id).is_err()) {
        Some(stray) => Err(format!("endpoint {stray} was not a candidate")),
        None => Ok(()),
    }
}

fn unfiltered(candidates: &[u32]) -> Routed {
    Routed {
        endpoints: candidates.to_vec(),
        by_plugin: false,
    }
}

#[cfg(test)]
mod tests {
    use super::check_subset;

    #[test]
    fn answers_are_subsets_without_duplicates() {
        assert!(check_subset(&[1, 2, 3], &[3, 1]).is_ok());
        assert!(check_subset(&[1, 2, 3], &[]).is_ok());
        assert!(check_subset(&[1, 2, 3], &[4])
            .unwrap_err()
            .contains("not a candidate"));
        assert!(check_subset(&[1, 2, 3], &[2, 2])
            .unwrap_err()
            .contains("twice"));
        assert!(check_subset(&[1], &[1, 1, 1])
            .unwrap_err()
            .contains("3 endpoints"));
    }
}
