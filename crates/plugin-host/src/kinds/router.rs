//! The router slot (ROUTE = FILTER). Safe default: no filtering (the candidates as given).

use std::sync::Arc;

use crate::bindings::wit;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;

pub use axle_spi::{RouteReads, RouteRequest, TagReads};

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
    /// What it declared at load (`declare`): the parts of a request it is given.
    reads: RouteReads,
}

/// Longest field path, and most fields or tag keys, a router may declare: the kernel
/// extracts and compares them on every call of a routed service.
const MAX_DECLARED: usize = 32;
const MAX_PATH: usize = 256;

impl RouterPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    /// Asks the first instance what it reads (every instance runs the same code and
    /// config); a router that cannot say, or declares nonsense, does not load.
    pub(crate) fn new(mut instances: Vec<Instance<RouterKind>>) -> Result<Self, Fault> {
        let declared = instances[0].call("declare", |b, s| b.call_declare(s))?;
        let reads = crate::convert::route_reads(declared);
        check_reads(&reads).map_err(Fault::Invalid)?;
        let owner = instances[0].pool_owner();
        Ok(RouterPlugin {
            reads,
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
        })
    }

    /// The parts of a request it reads (declared at load).
    pub fn reads(&self) -> &RouteReads {
        &self.reads
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
    ///
    /// `request` may carry more than the router declared (a slot's memo key is what all
    /// its routers read): only the declared parts cross into the component.
    pub fn route(&self, candidates: &[u32], request: &RouteRequest) -> Routed {
        let request = &if self.reads.keeps(request) {
            crate::convert::route_request(request)
        } else {
            crate::convert::route_request(&self.reads.narrow(request))
        };
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

/// Whether a declaration stays within what the kernel extracts per call.
fn check_reads(reads: &RouteReads) -> Result<(), String> {
    let keys = match &reads.tags {
        TagReads::Keys(keys) => keys.as_slice(),
        _ => &[],
    };
    if keys.len() > MAX_DECLARED || reads.fields.len() > MAX_DECLARED {
        return Err(format!(
            "declared {} tag keys and {} fields; at most {MAX_DECLARED} of each",
            keys.len(),
            reads.fields.len()
        ));
    }
    if let Some(bad) = reads
        .fields
        .iter()
        .find(|f| f.is_empty() || f.len() > MAX_PATH || f.split('.').any(str::is_empty))
    {
        return Err(format!(
            "declared field path {bad:?}: dotted names of 1..={MAX_PATH} bytes, no empty part"
        ));
    }
    if keys.iter().any(|k| k.is_empty()) {
        return Err("declared an empty tag key".into());
    }
    Ok(())
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
    use super::*;

    #[test]
    fn declarations_are_bounded() {
        assert!(check_reads(&RouteReads::default()).is_ok());
        let fields = |f: &[&str]| RouteReads {
            fields: f.iter().map(|s| s.to_string()).collect(),
            ..RouteReads::default()
        };
        assert!(check_reads(&fields(&["user.tier", "items.0.sku"])).is_ok());
        assert!(check_reads(&fields(&["user..tier"]))
            .unwrap_err()
            .contains("no empty part"));
        assert!(check_reads(&fields(&[""])).is_err());
        let many: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(check_reads(&fields(&many))
            .unwrap_err()
            .contains("at most 32"));
        let empty_key = RouteReads {
            tags: TagReads::Keys(vec![String::new()]),
            ..RouteReads::default()
        };
        assert!(check_reads(&empty_key)
            .unwrap_err()
            .contains("empty tag key"));
    }

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
