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
}

impl Member {
    fn ensure(&mut self) -> Result<(), Fault> {
        if self.inst.is_live() {
            return Ok(());
        }
        let table = self.table.clone();
        self.inst.ensure(|bindings, store| match &table {
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
    pub(crate) fn new(instances: Vec<Instance<RouterKind>>) -> Self {
        RouterPlugin {
            pool: Pool::new(
                instances
                    .into_iter()
                    .map(|inst| Member { inst, table: None })
                    .collect(),
            ),
        }
    }

    /// Pushes a new endpoint table to every instance.
    pub fn endpoints_changed(&self, table: &axle_spi::EndpointTable) {
        let table = Arc::new(crate::convert::table(table));
        self.pool.each(|member| {
            member.table = Some(table.clone());
            if member.ensure().is_ok() {
                let _ = member.inst.call("endpoints-changed", |b, s| {
                    b.call_endpoints_changed(s, &table)
                });
            }
        });
    }

    /// Narrows `candidates` for `request`.
    pub fn route(&self, candidates: &[u32], request: &RouteRequest) -> Routed {
        let request = &crate::convert::route_request(request);
        self.pool.with(|member| {
            let answer = match member.ensure() {
                Ok(()) => member
                    .inst
                    .call("route", |b, s| b.call_route(s, candidates, request)),
                Err(fault) => Err(fault),
            };
            match answer {
                Ok(endpoints) => {
                    let mut allowed = candidates.to_vec();
                    allowed.sort_unstable();
                    match endpoints
                        .iter()
                        .find(|id| allowed.binary_search(id).is_err())
                    {
                        None => Routed {
                            endpoints,
                            by_plugin: true,
                        },
                        Some(stray) => {
                            member.inst.fault(
                                "route",
                                &Fault::Invalid(format!("endpoint {stray} was not a candidate")),
                            );
                            unfiltered(candidates)
                        }
                    }
                }
                Err(_) => unfiltered(candidates),
            }
        })
    }
}

fn unfiltered(candidates: &[u32]) -> Routed {
    Routed {
        endpoints: candidates.to_vec(),
        by_plugin: false,
    }
}
