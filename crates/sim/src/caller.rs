//! The caller's kernel, on simulated endpoints: the client's loadout (the manifest's
//! plugins, loaded by `axle_client::loadout`, through the same plugin host), the kernel's
//! facts cells, breakers, retry budget, health records and rotation, and the request
//! path's decisions in the pipeline's order — route (routers, memoised per request kind
//! and rotation), select (the selector plugin, endpoints tried excluded, breakers
//! consulted), feedback (facts, breaker, selector), retry / failover
//! (`axle_client::decide`). What it does not run is the network: the engine delivers each
//! attempt's result.

use std::sync::Arc;

use axle_client::decide::{self, Next, Rerun};
use axle_client::health::rotation::{self, Cap, Standing};
use axle_client::health::{EndpointHealth, HealthChange, Settings};
use axle_client::loadout::{Loadout, ServiceSlots};
use axle_client::{CallError, Reply};
use axle_facts::EndpointCell;
use axle_governance::breaker::{Breaker, BreakerConfig, Permit};
use axle_governance::budget::RetryBudget;
use axle_governance::Governance;
use axle_manifest::Manifest;
use axle_plugin_host::kinds::router::RouteRequest;
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_plugin_host::PluginHost;
use axle_spi::{Outcome, OutcomeClass};

use crate::provider::Provider;
use crate::scenario::RequestKind;

/// One endpoint as the caller's kernel holds it (the client's `state::Endpoint` minus
/// the network link).
pub struct SimEndpoint {
    pub id: u32,
    pub cell: Arc<EndpointCell>,
    pub breaker: Breaker,
    pub health: EndpointHealth,
    /// Listed by discovery now.
    pub listed: bool,
}

/// A method's policy (the client's `MethodPolicy`): governance, breaker, selector.
pub struct Policy {
    pub governance: Governance,
    pub breaker: Breaker,
    pub selector: Arc<SelectorPlugin>,
    /// The route request the routers are asked with.
    request: RouteRequest,
    /// (rotation generation, set id, members) of the last route.
    memo: Option<(u64, u32, Arc<[u32]>)>,
}

/// The candidates of a request.
#[derive(Clone)]
pub struct Candidates {
    pub set: u32,
    pub members: Arc<[u32]>,
}

/// The rotation: the endpoints health admits, and their set in each selector.
struct Rotation {
    generation: u64,
    members: Vec<u32>,
    sets: Vec<(u64, u32)>,
}

/// The simulated caller's kernel.
pub struct Kernel {
    /// Keeps the plugins' engine, and owns the facts table.
    pub host: PluginHost,
    pub loadout: Loadout,
    slots: Arc<ServiceSlots>,
    pub settings: Settings,
    cap: Cap,
    pub budget: RetryBudget,
    /// One per request kind of the scenario.
    pub policies: Vec<Policy>,
    pub endpoints: Vec<SimEndpoint>,
    rotation: Rotation,
    published: Vec<axle_spi::Endpoint>,
    version: u64,
    /// Endpoint tables pushed to the plugins.
    pub tables: u64,
}

impl Kernel {
    /// Loads `manifest`'s plugins for `service` and gives every provider an endpoint.
    pub fn new(
        manifest: Manifest,
        service: &str,
        kinds: &[RequestKind],
        providers: &[Provider],
    ) -> anyhow::Result<Kernel> {
        let host = PluginHost::with_default_cache()?;
        let manifest = Arc::new(manifest);
        let services = std::iter::once(service.to_string()).collect();
        let (loadout, _) = Loadout::build(&host, manifest.clone(), &services, None)?;
        let slots = loadout.services[service].clone();
        let global = manifest.governance("", "");
        let tier = manifest.governance(service, "*");
        let reads = &slots.route_reads;
        let policies = kinds
            .iter()
            .map(|k| {
                let governance = manifest.governance(service, &k.method);
                let selector = slots
                    .selectors
                    .get(&governance.selector)
                    .cloned()
                    .unwrap_or_else(|| slots.selector.clone());
                let tags: Vec<(String, String)> = k
                    .tags
                    .iter()
                    .filter(|(key, _)| reads.tags.reads(key))
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                Policy {
                    breaker: Breaker::new(
                        format!("{service}/{}", k.method),
                        BreakerConfig::from(&governance),
                    ),
                    governance,
                    selector,
                    request: RouteRequest {
                        service: service.to_string(),
                        method: if reads.method {
                            k.method.clone()
                        } else {
                            String::new()
                        },
                        tags,
                        consumer_app: String::new(),
                        caller_address: String::new(),
                        fields: Vec::new(),
                    },
                    memo: None,
                }
            })
            .collect();
        let addresses: Vec<(&str, u32)> = providers
            .iter()
            .map(|p| (p.address.as_str(), p.weight))
            .collect();
        let cells = host.facts().allocate_all(&addresses);
        let mut endpoints = Vec::with_capacity(providers.len());
        for (i, (p, (id, cell))) in providers.iter().zip(cells).enumerate() {
            // `provider_of` relies on it: a fresh host's table numbers from 0.
            anyhow::ensure!(id as usize == i, "endpoint {} got id {id}, not {i}", p.name);
            endpoints.push(SimEndpoint {
                id,
                cell,
                breaker: Breaker::new(p.name.clone(), BreakerConfig::from(&global)),
                health: EndpointHealth::default(),
                listed: true,
            });
        }
        Ok(Kernel {
            loadout,
            slots,
            settings: Settings::from(&global),
            cap: Cap {
                max_ejection_percent: tier.max_ejection_percent,
                min_hosts: tier.min_hosts,
            },
            budget: RetryBudget::new(tier.retry_budget_ratio, tier.retry_budget_min_per_s),
            policies,
            endpoints,
            rotation: Rotation {
                generation: 0,
                members: Vec::new(),
                sets: Vec::new(),
            },
            published: Vec::new(),
            version: 0,
            tables: 0,
            host,
        })
    }

    /// Facts ids are allocated in provider order from a fresh table, so an endpoint's id
    /// is its provider's index.
    pub fn provider_of(id: u32) -> usize {
        id as usize
    }

    /// The client's `publish`: recomputes the rotation from the health records
    /// (`rotation::admit`) and pushes a new table to the plugins when what is in it
    /// changed (or a weight moved by more than a tenth, `rotation::weight_moved`).
    pub fn publish(&mut self, providers: &[Provider]) {
        let standings: Vec<Standing> = self
            .endpoints
            .iter()
            .filter(|e| e.listed)
            .map(|e| e.health.status().standing(e.id))
            .collect();
        let admitted = rotation::admit(&standings, self.cap);
        let entries: Vec<axle_spi::Endpoint> = admitted
            .iter()
            .map(|id| {
                let p = &providers[Self::provider_of(*id)];
                axle_spi::Endpoint {
                    id: *id,
                    address: p.address.clone(),
                    weight: self.endpoints[*id as usize].cell.effective_weight(),
                    tags: p.tags.clone(),
                }
            })
            .collect();
        let changed = self.version == 0
            || entries.len() != self.published.len()
            || entries.iter().zip(&self.published).any(|(new, old)| {
                new.id != old.id || rotation::weight_moved(old.weight, new.weight)
            });
        if changed {
            self.version += 1;
            self.tables += 1;
            let table = axle_spi::EndpointTable::new(self.version, entries.clone());
            self.published = entries;
            for s in self.loadout.selectors.values() {
                s.endpoints_changed(&table);
            }
            for r in &self.loadout.routers {
                r.endpoints_changed(&table);
            }
        }
        if changed || self.rotation.members != admitted {
            let sets = self
                .loadout
                .selectors
                .values()
                .map(|s| (s.id(), s.intern_set(&admitted)))
                .collect();
            self.rotation = Rotation {
                generation: self.rotation.generation + 1,
                members: admitted,
                sets,
            };
        }
    }

    /// The route stage: the rotation narrowed by the routers, memoised per request kind
    /// and rotation generation. `None`: no endpoint (`no_endpoint`).
    pub fn candidates(&mut self, kind: usize) -> Option<Candidates> {
        if self.rotation.members.is_empty() {
            return None;
        }
        let generation = self.rotation.generation;
        let policy = &mut self.policies[kind];
        if self.slots.routers.is_empty() {
            let id = policy.selector.id();
            if let Some((_, set)) = self.rotation.sets.iter().find(|(s, _)| *s == id) {
                return Some(Candidates {
                    set: *set,
                    members: self.rotation.members.clone().into(),
                });
            }
        }
        if let Some((g, set, members)) = &policy.memo {
            if *g == generation {
                return Some(Candidates {
                    set: *set,
                    members: members.clone(),
                });
            }
        }
        let mut left = self.rotation.members.clone();
        for router in &self.slots.routers {
            left = router.route(&left, &policy.request).endpoints;
        }
        if left.is_empty() {
            return None;
        }
        let set = policy.selector.intern_set(&left);
        let members: Arc<[u32]> = left.into();
        policy.memo = Some((generation, set, members.clone()));
        Some(Candidates { set, members })
    }

    /// The select stage (`stages::select::pick`): the selector's pick among the candidates
    /// not excluded, skipping endpoints whose breaker is open. `None`: none left.
    pub fn pick(
        &mut self,
        kind: usize,
        candidates: &Candidates,
        excluded: &mut Vec<u32>,
        hash_key: u64,
    ) -> Option<(u32, Permit)> {
        let selector = self.policies[kind].selector.clone();
        loop {
            let remaining = || -> Option<Vec<u32>> {
                let left: Vec<u32> = candidates
                    .members
                    .iter()
                    .copied()
                    .filter(|id| !excluded.contains(id))
                    .collect();
                (!left.is_empty()).then_some(left)
            };
            let set = if excluded.is_empty() {
                candidates.set
            } else {
                selector.intern_set(&remaining()?)
            };
            let id = match selector.select(set, hash_key) {
                Some(s) => s.endpoint,
                None => {
                    let left = remaining()?;
                    left[fastrand::usize(..left.len())]
                }
            };
            if excluded.contains(&id) {
                return None;
            }
            let Some(ep) = self.endpoints.get(id as usize).filter(|e| e.listed) else {
                excluded.push(id);
                continue;
            };
            match ep.breaker.try_acquire() {
                Permit::Rejected => excluded.push(id),
                permit => return Some((id, permit)),
            }
        }
    }

    /// The feedback stage (`stages::feedback::Attempt::finish`): the endpoint's breaker,
    /// its facts, the selector. Returns true when a refused connect showed the endpoint
    /// unreachable for the first time (the caller then republishes at once).
    pub fn finish(
        &mut self,
        kind: usize,
        id: u32,
        permit: Permit,
        latency_ns: u64,
        result: &Result<Reply, CallError>,
    ) -> bool {
        let ep = &self.endpoints[id as usize];
        let slow = ep
            .breaker
            .is_slow(std::time::Duration::from_nanos(latency_ns));
        ep.breaker.record(permit, decide::verdict(result, slow));
        let class: OutcomeClass = decide::classify(result);
        ep.cell.finished(latency_ns, class);
        self.policies[kind].selector.feedback(&Outcome {
            endpoint: id,
            class,
            latency_ns,
        });
        match result {
            Err(CallError::Transport(axle_transport::TransportError::Connect { .. })) => {
                ep.health.mark_unreachable()
            }
            _ => false,
        }
    }

    /// What may follow a failed attempt, by the method's governance.
    pub fn next(&self, kind: usize, err: &CallError) -> Next {
        decide::next(err, Rerun::of(&self.policies[kind].governance))
    }

    /// Whether going on after `err` draws on the retry budget.
    pub fn costs_budget(err: &CallError, next: Next) -> bool {
        decide::costs_budget(err, next)
    }

    /// Rotation members now.
    pub fn rotation_len(&self) -> usize {
        self.rotation.members.len()
    }
}

/// A health change worth counting.
pub fn counts(change: HealthChange) -> &'static str {
    match change {
        HealthChange::Disabled => "disabled",
        HealthChange::Removed => "ejected",
        HealthChange::Unreachable => "unreachable",
        HealthChange::Readmitted => "readmitted",
    }
}
