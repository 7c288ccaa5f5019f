//! What a client knows: its endpoints (ids, links, facts), its services (slot plugins,
//! members, memoised routes), and the plugins those use. Built once from the manifest;
//! the endpoint table is pushed to every plugin that needs it when it is built.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use arc_swap::ArcSwap;

use crate::facts::EndpointCell;
use crate::governance::breaker::{Breaker, BreakerConfig};
use crate::governance::budget::RetryBudget;
use crate::governance::Governance;
use crate::manifest::{EndpointSpec, Manifest};
use crate::plugin::bindings::wit;
use crate::plugin::kinds::router::RouterPlugin;
use crate::plugin::kinds::selector::SelectorPlugin;
use crate::plugin::kinds::serializer::SerializerPlugin;
use crate::plugin::{LoadedPlugin, Plugin, PluginHost};
use crate::transport::endpoint::EndpointLink;
use crate::transport::Keepalive;
use crate::wire::Limits;

use super::CallError;

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
    /// A config with the manifest's endpoints and default limits.
    pub fn new(manifest: Manifest) -> Self {
        ClientConfig {
            manifest,
            endpoints: BTreeMap::new(),
            limits: Limits::default(),
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
    pub spec: EndpointSpec,
    pub link: EndpointLink,
    pub cell: Arc<EndpointCell>,
    /// The per-endpoint breaker (thresholds from the global tier).
    pub breaker: Breaker,
}

/// A memoised route: what a router may look at besides the table and the method, and the
/// candidate set it led to.
#[derive(Clone)]
pub struct RouteMemo {
    pub tags: Vec<(String, String)>,
    pub consumer_app: String,
    pub set: u32,
    pub members: Arc<[u32]>,
}

/// One method's effective governance, its breaker, and its selector (the service's slot,
/// or the one its governance names).
pub struct MethodPolicy {
    pub governance: Governance,
    pub breaker: Breaker,
    pub selector: Arc<SelectorPlugin>,
    /// The set of all the service's members, in this selector.
    pub all_set: u32,
}

impl ServiceState {
    /// The policy of `method`, resolved from the manifest's tiers on first use.
    pub fn policy(&self, method: &str) -> Arc<MethodPolicy> {
        if let Some(p) = self.policies.load().get(method) {
            return p.clone();
        }
        let _creating = self.creating.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = self.policies.load().get(method) {
            return p.clone();
        }
        let governance = self.manifest.governance(&self.name, method);
        let breaker = Breaker::new(
            format!("{}/{method}", self.name),
            BreakerConfig::from(&governance),
        );
        let selector = self
            .selectors
            .get(&governance.selector)
            .cloned()
            .unwrap_or_else(|| self.selector.clone());
        let all_set = selector.intern_set(&self.members);
        let p = Arc::new(MethodPolicy {
            governance,
            breaker,
            selector,
            all_set,
        });
        let mut next = rustc_hash::FxHashMap::clone(&self.policies.load());
        next.insert(method.to_string(), p.clone());
        self.policies.store(Arc::new(next));
        p
    }
}

/// One service as the client holds it.
pub struct ServiceState {
    pub name: String,
    /// The manifest's governance tiers (resolved per method on first use).
    pub manifest: Arc<Manifest>,
    /// Per method: effective governance, breaker and selector. Read on every call without
    /// a lock; written (copy-on-write, under `creating`) once per method.
    pub policies: ArcSwap<rustc_hash::FxHashMap<String, Arc<MethodPolicy>>>,
    pub creating: Mutex<()>,
    /// Retries of all this service's calls share one budget.
    pub budget: RetryBudget,
    pub serializer: Option<Arc<SerializerPlugin>>,
    pub selector: Arc<SelectorPlugin>,
    /// Every loaded selector by name, for methods whose governance names one.
    pub selectors: Arc<rustc_hash::FxHashMap<String, Arc<SelectorPlugin>>>,
    pub routers: Vec<Arc<RouterPlugin>>,
    /// The service's endpoint ids.
    pub members: Arc<[u32]>,
    /// Router answers per method, then per request shape (looked up without allocating or
    /// locking; written copy-on-write when a new shape appears).
    pub memo: ArcSwap<rustc_hash::FxHashMap<String, Arc<Vec<RouteMemo>>>>,
    pub consumer_app: Option<String>,
}

/// A snapshot of one endpoint's facts, for people.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EndpointView {
    pub id: u32,
    pub address: String,
    pub calls: u64,
    pub faults: u64,
    pub in_flight: u32,
    pub ewma_latency_ns: u64,
}

pub struct Registry {
    /// Kept for their counters (and so plugins live as long as the client).
    pub plugins: BTreeMap<String, LoadedPlugin>,
    /// By endpoint id (ids are the plugin host's, so this may have holes).
    pub endpoints: Vec<Option<Endpoint>>,
    pub services: rustc_hash::FxHashMap<String, Arc<ServiceState>>,
    /// Serializers by the content type they write, to decode responses.
    pub serializers: HashMap<String, Arc<SerializerPlugin>>,
}

impl Registry {
    pub fn build(host: &PluginHost, config: ClientConfig) -> anyhow::Result<Registry> {
        let manifest = Arc::new(config.manifest.clone());
        let endpoint_breakers = BreakerConfig::from(&manifest.governance("", ""));
        let mut per_service = manifest.endpoints.clone();
        per_service.extend(config.endpoints.clone());

        // Only the plugins the services' slots name are loaded.
        let mut wanted = BTreeSet::new();
        for service in per_service.keys() {
            let slots = manifest.slots_for(service);
            wanted.extend(slots.serializer.clone());
            wanted.extend(slots.selector.clone());
            wanted.extend(slots.routers.clone().unwrap_or_default());
        }
        let layers = std::iter::once(&manifest.governance)
            .chain(manifest.service_governance.values())
            .chain(manifest.method_governance.values());
        wanted.extend(
            layers
                .filter_map(|l| l.selector.clone())
                .filter(|n| !n.is_empty()),
        );
        let mut plugins = BTreeMap::new();
        for name in wanted {
            let spec = manifest
                .plugins
                .get(&name)
                .with_context(|| format!("{}: no plugin `{name}`", manifest.file))?;
            plugins.insert(name.clone(), host.load(spec)?);
        }

        // Endpoint ids come from the host's facts: one per distinct address.
        let mut endpoints: Vec<Option<Endpoint>> = Vec::new();
        let mut members_of: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (service, list) in &per_service {
            let members = members_of.entry(service.clone()).or_default();
            for spec in list {
                let (id, cell) = host.facts().allocate(&spec.address, spec.weight);
                let slot = id as usize;
                if endpoints.len() <= slot {
                    endpoints.resize_with(slot + 1, || None);
                }
                if endpoints[slot].is_none() {
                    endpoints[slot] = Some(Endpoint {
                        id,
                        spec: spec.clone(),
                        link: EndpointLink::new(
                            spec.address.clone(),
                            config.limits,
                            config.keepalive,
                        ),
                        cell,
                        breaker: Breaker::new(spec.address.clone(), endpoint_breakers),
                    });
                }
                if !members.contains(&id) {
                    members.push(id);
                }
            }
        }
        let table = Arc::new(wit::EndpointTable {
            version: 1,
            endpoints: endpoints
                .iter()
                .flatten()
                .map(|e| wit::Endpoint {
                    id: e.id,
                    address: e.spec.address.clone(),
                    weight: e.spec.weight,
                    tags: e.spec.tags.clone(),
                })
                .collect(),
        });
        for p in plugins.values() {
            match &p.plugin {
                Plugin::Selector(s) => s.endpoints_changed(table.clone()),
                Plugin::Router(r) => r.endpoints_changed(table.clone()),
                _ => {}
            }
        }

        let mut serializers = HashMap::new();
        for p in plugins.values() {
            if let Plugin::Serializer(s) = &p.plugin {
                serializers.insert(s.content_type().to_string(), s.clone());
            }
        }

        let selectors: Arc<rustc_hash::FxHashMap<String, Arc<SelectorPlugin>>> = Arc::new(
            plugins
                .iter()
                .filter_map(|(name, p)| match &p.plugin {
                    Plugin::Selector(s) => Some((name.clone(), s.clone())),
                    _ => None,
                })
                .collect(),
        );
        let mut services = rustc_hash::FxHashMap::default();
        for (service, members) in members_of {
            let slots = manifest.slots_for(&service);
            let pick = |name: &Option<String>| name.as_ref().and_then(|n| plugins.get(n));
            let selector = match pick(&slots.selector).map(|p| &p.plugin) {
                Some(Plugin::Selector(s)) => s.clone(),
                _ => bail!(
                    "{}: service `{service}` has no selector: set [slots] selector or [services.{service}.slots] selector",
                    manifest.file
                ),
            };
            let serializer = match pick(&slots.serializer).map(|p| &p.plugin) {
                Some(Plugin::Serializer(s)) => Some(s.clone()),
                _ => None,
            };
            let routers = slots
                .routers
                .iter()
                .flatten()
                .filter_map(|n| match plugins.get(n).map(|p| &p.plugin) {
                    Some(Plugin::Router(r)) => Some(r.clone()),
                    _ => None,
                })
                .collect();
            let g = manifest.governance(&service, "");
            services.insert(
                service.clone(),
                Arc::new(ServiceState {
                    name: service,
                    manifest: manifest.clone(),
                    policies: ArcSwap::from_pointee(rustc_hash::FxHashMap::default()),
                    creating: Mutex::new(()),
                    budget: RetryBudget::new(g.retry_budget_ratio, g.retry_budget_min_per_s),
                    serializer,
                    selector,
                    selectors: selectors.clone(),
                    routers,
                    members: members.into(),
                    memo: ArcSwap::from_pointee(rustc_hash::FxHashMap::default()),
                    consumer_app: config.consumer_app.clone(),
                }),
            );
        }
        Ok(Registry {
            plugins,
            endpoints,
            services,
            serializers,
        })
    }

    pub fn service(&self, name: &str) -> Result<Arc<ServiceState>, CallError> {
        self.services
            .get(name)
            .cloned()
            .ok_or_else(|| CallError::NoSuchService(name.to_string()))
    }

    /// Endpoint `id`; the selector only answers members of the service's sets, which
    /// are all here.
    pub fn endpoint(&self, id: u32) -> Option<&Endpoint> {
        self.endpoints.get(id as usize).and_then(Option::as_ref)
    }

    pub fn views(&self) -> Vec<EndpointView> {
        self.endpoints
            .iter()
            .flatten()
            .map(|e| {
                let f = e.cell.snapshot();
                let (calls, faults) = e.cell.totals();
                EndpointView {
                    id: e.id,
                    address: e.spec.address.clone(),
                    calls,
                    faults,
                    in_flight: f.in_flight,
                    ewma_latency_ns: f.ewma_latency_ns,
                }
            })
            .collect()
    }
}
