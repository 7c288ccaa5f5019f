//! What a client knows: its endpoints (ids, links, facts, health), its services (slot
//! plugins, members, the rotation selection may use, method policies with their memoised
//! routes), and the plugins those use. Built from the manifest; endpoints change at
//! runtime (`set_endpoints`, and health verdicts), and every change is published to the
//! plugins as a new versioned endpoint table holding the endpoints in rotation, with their
//! effective weights.
//!
//! Method policies are keyed by declared methods only: a method the manifest names
//! (`[services.S.methods.M]`) has its own policy, breaker and route memo, resolved when the
//! client is built or swapped; every other name of the service shares one (`*`, the
//! service tier). Callers choose method names, so a stream of new ones costs no lookup
//! beyond a hash miss, no allocation and no memory.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use arc_swap::ArcSwap;

use crate::health::rotation::{self, Cap};
use crate::health::{EndpointHealth, HealthChange, HealthEvent};
use crate::stages::count::CallCounters;
use axle_facts::{EndpointCell, FactsTable};
use axle_governance::breaker::{Breaker, BreakerConfig};
use axle_governance::budget::RetryBudget;
use axle_governance::Governance;
use axle_manifest::{EndpointSpec, Manifest};
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_plugin_host::PluginHost;
use axle_spi as spi;

use super::loadout::{Loadout, ServiceSlots};
use axle_transport::endpoint::EndpointLink;
use axle_transport::tls::ClientTls;
use axle_transport::Keepalive;
use axle_wire::Limits;

use super::CallError;
pub use crate::current::{Current, Rotation};

/// How to build a client.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Plugins and slots (and endpoints, unless overridden below).
    pub manifest: Manifest,
    /// Endpoints per service, replacing the manifest's for those services.
    pub endpoints: BTreeMap<String, Vec<EndpointSpec>>,
    /// Frame limits.
    pub limits: Limits,
    /// Connection keep-alive.
    pub keepalive: Keepalive,
    /// This application's name, sent with every request.
    pub consumer_app: Option<String>,
}

impl ClientConfig {
    /// A config with the manifest's endpoints, default limits and the manifest's
    /// compression.
    pub fn new(manifest: Manifest) -> Self {
        let limits = Limits {
            compression: manifest.compression(),
            ..Limits::default()
        };
        ClientConfig {
            manifest,
            endpoints: BTreeMap::new(),
            limits,
            keepalive: Keepalive::default(),
            consumer_app: None,
        }
    }

    /// Sets (replaces) the endpoints of `service`.
    pub fn endpoints(
        mut self,
        service: &str,
        addresses: impl IntoIterator<Item = EndpointSpec>,
    ) -> Self {
        self.endpoints
            .insert(service.to_string(), addresses.into_iter().collect());
        self
    }
}

/// One endpoint as the client holds it.
pub struct Endpoint {
    pub id: u32,
    /// What discovery says about it (replaced when discovery changes it).
    pub spec: ArcSwap<EndpointSpec>,
    pub link: EndpointLink,
    pub cell: Arc<EndpointCell>,
    /// The per-endpoint breaker (thresholds from the global tier).
    pub breaker: Breaker,
    pub health: EndpointHealth,
}

/// The name of the policy every method the manifest does not declare shares.
pub const UNDECLARED: &str = "*";

/// One policy's effective governance, its breaker, its selector (the service's slot, or
/// the one its governance names) and its memoised routes.
pub struct MethodPolicy {
    /// The method it is kept for, or [`UNDECLARED`]: what its breaker is named after and
    /// what routers are asked about (a router sees `*` for an undeclared method, whose
    /// answer every such name shares).
    pub method: Arc<str>,
    pub governance: Governance,
    /// Kept across swaps while its thresholds stay the same.
    pub breaker: Arc<Breaker>,
    pub selector: Arc<SelectorPlugin>,
    /// Its place among the service's policies: where the service's `Current` keeps its
    /// memoised routes (`Current::routes`).
    pub index: usize,
    /// What its calls came to (kept across swaps: a swap is no reason to lose counts).
    pub counters: Arc<CallCounters>,
    /// Answers kept for `cache-ttl-ms` (none: the method does not cache; new with every
    /// policy, so a swap never answers from a cache the new settings did not make).
    pub cache: Option<crate::stages::cache::Cache>,
    /// The slots it was resolved from: a call reads its routers, shadow and interceptors
    /// from the same snapshot as its selector, and without a load of its own (an
    /// `ArcSwap` load is two locked operations).
    pub slots: Arc<ServiceSlots>,
}

/// One service's policies: one per declared method, one shared by every other name.
/// Resolved whole when the client is built and on every swap; never grows with calls.
pub struct Policies {
    declared: rustc_hash::FxHashMap<String, Arc<MethodPolicy>>,
    undeclared: Arc<MethodPolicy>,
}

impl Policies {
    /// The policy of `method`: its own if the manifest declares it, else the shared one.
    pub fn of(&self, method: &str) -> &Arc<MethodPolicy> {
        self.declared.get(method).unwrap_or(&self.undeclared)
    }

    /// Every policy, the shared one last.
    pub fn all(&self) -> impl Iterator<Item = &Arc<MethodPolicy>> {
        self.declared.values().chain([&self.undeclared])
    }

    /// The plugins in the service's slots, which every policy was resolved from.
    pub fn slots(&self) -> &Arc<ServiceSlots> {
        &self.undeclared.slots
    }

    /// The policies of `service` from `slots` (and its manifest); `previous`: the ones
    /// they replace, whose breakers are kept where the thresholds did not change.
    fn resolve(service: &str, slots: &Arc<ServiceSlots>, previous: Option<&Policies>) -> Policies {
        let manifest = &slots.manifest;
        let declared = manifest
            .method_governance
            .keys()
            .filter(|(s, _)| s == service)
            .enumerate()
            .map(|(index, (_, method))| {
                let old = previous.and_then(|p| p.declared.get(method)).map(|p| &**p);
                let g = manifest.governance(service, method);
                let policy = MethodPolicy::new(service, method, g, slots, old, index);
                (method.clone(), Arc::new(policy))
            })
            .collect::<rustc_hash::FxHashMap<_, _>>();
        let g = service_tier(manifest, service);
        let old = previous.map(|p| &*p.undeclared);
        let index = declared.len();
        let undeclared = MethodPolicy::new(service, UNDECLARED, g, slots, old, index);
        let undeclared = Arc::new(undeclared);
        Policies {
            declared,
            undeclared,
        }
    }
}

impl MethodPolicy {
    fn new(
        service: &str,
        method: &str,
        governance: Governance,
        slots: &Arc<ServiceSlots>,
        previous: Option<&MethodPolicy>,
        index: usize,
    ) -> Self {
        let config = BreakerConfig::from(&governance);
        let breaker = match previous {
            Some(p) if BreakerConfig::from(&p.governance) == config => p.breaker.clone(),
            _ => Arc::new(Breaker::new(format!("{service}/{method}"), config)),
        };
        let selector = slots
            .selectors
            .get(&governance.selector)
            .cloned()
            .unwrap_or_else(|| slots.selector.clone());
        let counters: Arc<CallCounters> = previous.map(|p| p.counters.clone()).unwrap_or_default();
        counters.monitor(governance.monitor);
        MethodPolicy {
            method: method.into(),
            cache: crate::stages::cache::Cache::of(&governance),
            governance,
            breaker,
            selector,
            index,
            counters,
            slots: slots.clone(),
        }
    }
}

/// The global and service tiers of `service`: what an undeclared method gets (a method
/// tier never applies to it, whatever the caller named it).
fn service_tier(manifest: &Manifest, service: &str) -> Governance {
    let mut tiers = vec![(axle_governance::Tier::Global, &manifest.governance)];
    if let Some(layer) = manifest.service_governance.get(service) {
        tiers.push((axle_governance::Tier::Service, layer));
    }
    axle_governance::resolve(&tiers).0
}

impl ServiceState {
    /// The policies and rotation now, counted: what a call holds to its end.
    pub fn current(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// The policies and rotation now, not counted: for a read that ends before any await
    /// (a typed call's encoding, the views), where a count would be one more write to a
    /// line every core's calls write.
    pub fn read(&self) -> arc_swap::Guard<Arc<Current>> {
        self.current.load()
    }

    /// Takes new slots: every policy is resolved again at once (so no call after the
    /// swap uses the old selector), keeping breakers whose thresholds did not change.
    /// Swaps are serialised by the caller (`ClientState::swap`, under `published`).
    fn swap_slots(&self, slots: Arc<ServiceSlots>) {
        let now = self.current.load();
        let next = Policies::resolve(&self.name, &slots, Some(&now.policies));
        let next = Current::new(Arc::new(next), now.rotation.clone());
        self.current.store(Arc::new(next));
    }

    /// Takes a new rotation, with no memoised routes (they were made from the old one).
    /// Serialised by the caller (under `published`).
    fn rotate(&self, rotation: Rotation) {
        let now = self.current.load();
        let next = Current::new(now.policies.clone(), Arc::new(rotation));
        self.current.store(Arc::new(next));
    }
}

/// One service as the client holds it.
pub struct ServiceState {
    pub name: String,
    /// Its policies (per declared method, and one for every other name: effective
    /// governance, breaker, selector, memoised routes, and the slots they were resolved
    /// from, `Policies::slots`), replaced on a swap; and its rotation, replaced when
    /// health or membership changes. Read once a call, without a lock.
    current: ArcSwap<Current>,
    /// Retries of all this service's calls share one budget.
    pub budget: RetryBudget,
    /// The service's endpoint ids, as discovery gives them (the ones selection may use
    /// now are its rotation's).
    pub members: ArcSwap<Vec<u32>>,
    /// The ejection cap (from the service tier).
    pub cap: Cap,
    pub consumer_app: Option<String>,
    /// The local IP this host reaches the service's endpoints from (`caller_address`),
    /// what routers reading the caller's address see; set when membership changes.
    pub caller_address: ArcSwap<String>,
}

/// The table last published to the plugins.
#[derive(Default)]
struct Published {
    version: u64,
    entries: Vec<spi::Endpoint>,
}

pub struct ClientState {
    /// The plugins and which slots they fill (replaced whole by a swap).
    pub loadout: ArcSwap<Loadout>,
    /// By endpoint id (ids are the plugin host's, so this may have holes).
    endpoints: ArcSwap<Vec<Option<Arc<Endpoint>>>>,
    pub services: rustc_hash::FxHashMap<String, Arc<ServiceState>>,
    /// Health settings (global tier).
    pub health: crate::health::Settings,
    facts: Arc<FactsTable>,
    limits: Limits,
    keepalive: Keepalive,
    /// `[tls]`'s caller side: every endpoint is dialled over TLS with it.
    tls: Option<ClientTls>,
    endpoint_breakers: BreakerConfig,
    /// Serialises membership changes and publications.
    published: Mutex<Published>,
    /// Wakes the health monitor (a refused connect, new membership).
    pub changed: Arc<tokio::sync::Notify>,
    /// Told by the endpoints' links when a connection stops taking requests (goaway,
    /// closed): wakes the monitor's re-dialling (`health::redial`).
    pub links: Arc<tokio::sync::Notify>,
    events: tokio::sync::broadcast::Sender<HealthEvent>,
    /// Set once the health monitor runs (it starts with the first call: it needs a Tokio
    /// runtime, which a client may be built without).
    pub monitor: std::sync::OnceLock<()>,
    /// The run-time rules applied (or refused), for the stats.
    pub rules: crate::rules::RuleBook,
}

impl ClientState {
    pub fn build(host: &PluginHost, config: ClientConfig) -> anyhow::Result<ClientState> {
        let manifest = Arc::new(config.manifest.clone());
        let global = manifest.governance("", "");
        let mut per_service = manifest.endpoints.clone();
        per_service.extend(config.endpoints.clone());
        let names: BTreeSet<String> = per_service.keys().cloned().collect();
        let (loadout, _) = Loadout::build(host, manifest.clone(), &names, None)?;

        let mut services = rustc_hash::FxHashMap::default();
        for service in &names {
            let g = service_tier(&manifest, service);
            let slots = loadout.services[service].clone();
            services.insert(
                service.clone(),
                Arc::new(ServiceState {
                    name: service.clone(),
                    current: ArcSwap::from_pointee(Current::new(
                        Arc::new(Policies::resolve(service, &slots, None)),
                        Arc::new(Rotation::empty()),
                    )),
                    budget: RetryBudget::new(g.retry_budget_ratio, g.retry_budget_min_per_s),
                    members: ArcSwap::from_pointee(Vec::new()),
                    cap: Cap {
                        max_ejection_percent: g.max_ejection_percent,
                        min_hosts: g.min_hosts,
                    },
                    consumer_app: config.consumer_app.clone(),
                    caller_address: ArcSwap::from_pointee(String::new()),
                }),
            );
        }
        let state = ClientState {
            loadout: ArcSwap::from_pointee(loadout),
            endpoints: ArcSwap::from_pointee(Vec::new()),
            services,
            health: crate::health::Settings::from(&global),
            facts: host.facts().clone(),
            limits: config.limits,
            keepalive: config.keepalive,
            tls: match &manifest.tls.client {
                Some(files) => Some(ClientTls::load(files)?),
                None => None,
            },
            endpoint_breakers: BreakerConfig::from(&global),
            published: Mutex::new(Published::default()),
            changed: Arc::new(tokio::sync::Notify::new()),
            links: Arc::new(tokio::sync::Notify::new()),
            events: tokio::sync::broadcast::channel(256).0,
            monitor: std::sync::OnceLock::new(),
            rules: crate::rules::RuleBook::default(),
        };
        for (service, list) in per_service {
            state.set_endpoints(&service, list)?;
        }
        Ok(state)
    }

    /// Hot-swap: resolves `manifest` (loading, configuring and self-checking only the
    /// plugins that are new or changed, off the hot path), gives the new plugins the
    /// current endpoint table and candidate sets, then switches every service at once.
    /// Calls in flight finish on the plugins they started with. On any error nothing
    /// changes. Services and endpoints stay as they are (discovery owns those).
    pub fn swap(
        &self,
        host: &PluginHost,
        manifest: Manifest,
    ) -> anyhow::Result<axle_plugin_host::SwapReport> {
        let names: BTreeSet<String> = self.services.keys().cloned().collect();
        let (loadout, change) =
            Loadout::build(host, Arc::new(manifest), &names, Some(&self.loadout.load()))?;
        let loadout = Arc::new(loadout);
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        // The new selectors and routers get the table and the sets before any call can
        // reach them, with the new weight overrides.
        crate::weights::reapply(self, &loadout.manifest);
        self.publish_with(&mut published, &loadout, true);
        self.loadout.store(loadout.clone());
        for (name, svc) in &self.services {
            svc.swap_slots(loadout.services[name].clone());
        }
        Ok(change)
    }

    /// Service `name`, borrowed: the set of services is fixed when the client is built,
    /// so a call holds the client and needs no count of its own on the service (a count
    /// every call on every core would write: `docs/performance.md`, "Shared counts").
    pub fn service(&self, name: &str) -> Result<&ServiceState, CallError> {
        self.services
            .get(name)
            .map(|svc| &**svc)
            .ok_or_else(|| CallError::NoSuchService(name.to_string()))
    }

    /// Endpoint `id`, if it is still in the client (a call may outlive its endpoint's
    /// removal: it holds its own reference).
    pub fn endpoint(&self, id: u32) -> Option<Arc<Endpoint>> {
        self.endpoints.load().get(id as usize).cloned().flatten()
    }

    /// Every endpoint of the client.
    pub fn all_endpoints(&self) -> Vec<Arc<Endpoint>> {
        self.endpoints.load().iter().flatten().cloned().collect()
    }

    /// Replaces the endpoints of `service`: new addresses get ids and links, endpoints no
    /// service lists any more leave the client, kept ones keep their connection and
    /// health. The plugins get a new table before this returns.
    pub fn set_endpoints(&self, service: &str, list: Vec<EndpointSpec>) -> anyhow::Result<()> {
        let svc = self
            .services
            .get(service)
            .with_context(|| format!("no service `{service}` in this client"))?;
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let mut endpoints = Vec::clone(&self.endpoints.load());
        let mut members = Vec::with_capacity(list.len());
        let address = crate::caller_address::towards(&list);
        let loadout = self.loadout.load();
        let overrides = crate::weights::overrides(&loadout.manifest);
        for spec in list {
            let weight = crate::weights::effective(&spec, &overrides);
            let (id, cell) = self.facts.allocate(&spec.address, weight);
            cell.set_weight(weight);
            let slot = id as usize;
            if endpoints.len() <= slot {
                endpoints.resize_with(slot + 1, || None);
            }
            match &endpoints[slot] {
                Some(ep) => ep.spec.store(Arc::new(spec)),
                None => {
                    endpoints[slot] = Some(Arc::new(Endpoint {
                        id,
                        link: EndpointLink::new(spec.address.clone(), self.limits, self.keepalive)
                            .with_tls(self.tls.clone())
                            .with_watch(self.links.clone()),
                        breaker: Breaker::new(spec.address.clone(), self.endpoint_breakers),
                        spec: ArcSwap::from_pointee(spec),
                        cell,
                        health: EndpointHealth::default(),
                    }))
                }
            }
            if !members.contains(&id) {
                members.push(id);
            }
        }
        svc.members.store(Arc::new(members));
        svc.caller_address.store(Arc::new(address));
        // Endpoints no service lists any more leave (their links close when the last call
        // holding them finishes).
        let listed: BTreeSet<u32> = self
            .services
            .values()
            .flat_map(|s| s.members.load().iter().copied().collect::<Vec<_>>())
            .collect();
        for (id, slot) in endpoints.iter_mut().enumerate() {
            if slot.is_some() && !listed.contains(&(id as u32)) {
                *slot = None;
            }
        }
        self.endpoints.store(Arc::new(endpoints));
        self.publish_locked(&mut published);
        drop(published);
        self.changed.notify_one();
        Ok(())
    }

    /// Recomputes every service's rotation from its endpoints' health, and publishes a new
    /// table to the plugins if what is in rotation (or a weight, by more than a tenth)
    /// changed. Called by the health monitor after it changed something.
    pub fn publish(&self) {
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        self.publish_locked(&mut published);
    }

    fn publish_locked(&self, published: &mut Published) {
        self.publish_with(published, &self.loadout.load(), false);
    }

    /// Publishes to `loadout`'s plugins; `force`: push the table even if it did not change
    /// (plugins that have never seen it are about to go live).
    fn publish_with(&self, published: &mut Published, loadout: &Loadout, force: bool) {
        let endpoints = self.endpoints.load();
        let get = |id: u32| endpoints.get(id as usize).and_then(Option::as_ref);
        let mut in_table = BTreeSet::new();
        let mut rotations = Vec::with_capacity(self.services.len());
        for svc in self.services.values() {
            let standings: Vec<rotation::Standing> = svc
                .members
                .load()
                .iter()
                .filter_map(|id| get(*id))
                .map(|ep| ep.health.status().standing(ep.id))
                .collect();
            let admitted = rotation::admit(&standings, svc.cap);
            in_table.extend(admitted.iter().copied());
            rotations.push((svc, admitted));
        }
        let entries: Vec<spi::Endpoint> = in_table
            .iter()
            .filter_map(|id| get(*id))
            .map(|ep| {
                let spec = ep.spec.load();
                spi::Endpoint {
                    id: ep.id,
                    address: spec.address.clone(),
                    weight: ep.cell.effective_weight(),
                    tags: spec.tags.clone(),
                }
            })
            .collect();
        let table_changed = force
            || published.version == 0
            || entries.len() != published.entries.len()
            || entries.iter().zip(&published.entries).any(|(new, old)| {
                new.id != old.id
                    || new.address != old.address
                    || new.tags != old.tags
                    || rotation::weight_moved(old.weight, new.weight)
            });
        if table_changed {
            published.version += 1;
            published.entries = entries.clone();
            let table = spi::EndpointTable::new(published.version, entries);
            for s in loadout.selectors.values() {
                s.endpoints_changed(&table);
            }
            for r in &loadout.routers {
                r.endpoints_changed(&table);
            }
        }
        for (svc, admitted) in rotations {
            let held = |id: u32| get(id).cloned();
            if !table_changed && svc.current.load().rotation.holds(&admitted, held) {
                continue;
            }
            let sets = loadout
                .selectors
                .values()
                .map(|s| (s.id(), s.intern_set(&admitted)))
                .collect();
            let endpoints = admitted.iter().filter_map(|id| Some((*id, held(*id)?)));
            let endpoints = endpoints.collect();
            svc.rotate(Rotation::new(admitted.into(), sets, endpoints));
        }
    }

    /// Records a health change: logged, and sent to subscribers.
    pub fn event(&self, ep: &Endpoint, change: HealthChange) {
        let address = ep.spec.load().address.clone();
        tracing::info!(endpoint = ep.id, %address, ?change, "endpoint health");
        let _ = self.events.send(HealthEvent {
            endpoint: ep.id,
            address,
            change,
        });
    }

    /// Health events from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<HealthEvent> {
        self.events.subscribe()
    }
}
