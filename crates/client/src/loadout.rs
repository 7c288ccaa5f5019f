//! A client's loadout: the plugins it runs and which slot of which service each fills,
//! resolved from one manifest. Built whole and swapped whole (hot-swap): a call sees
//! either the old loadout or the new one, never a mix, and calls in flight finish on the
//! plugins they started with (they hold them).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::{bail, Context};

use axle_manifest::{Manifest, PluginSpec};
use axle_plugin_host::kinds::health_scorer::HealthScorerPlugin;
use axle_plugin_host::kinds::interceptor::InterceptorPlugin;
use axle_plugin_host::kinds::router::RouterPlugin;
use axle_plugin_host::kinds::selector::SelectorPlugin;
use axle_plugin_host::kinds::serializer::SerializerPlugin;
use axle_plugin_host::SwapReport;
use axle_plugin_host::{LoadedPlugin, Plugin, PluginHost};

use crate::stages::shadow::Shadows;

/// The plugins filling one service's slots, and what resolving a method's policy needs.
pub struct ServiceSlots {
    pub serializer: Option<Arc<SerializerPlugin>>,
    pub selector: Arc<SelectorPlugin>,
    pub routers: Vec<Arc<RouterPlugin>>,
    /// What the routers read together: the parts of a request a route memo is keyed by.
    pub route_reads: axle_spi::RouteReads,
    /// Every selector of the loadout, for methods whose governance names one.
    pub selectors: Arc<rustc_hash::FxHashMap<String, Arc<SelectorPlugin>>>,
    /// The `client-interceptors` chain, in manifest order.
    pub client_interceptors: Vec<Arc<InterceptorPlugin>>,
    /// The manifest's governance tiers.
    pub manifest: Arc<Manifest>,
    /// The shadow selector and routers, when the slots name any (`stages::shadow`).
    pub shadow: Option<Arc<Shadows>>,
}

/// Everything a manifest's slots resolve to.
pub struct Loadout {
    pub manifest: Arc<Manifest>,
    /// The loaded plugins, by manifest name (with their specs, to tell what changed).
    pub plugins: BTreeMap<String, (PluginSpec, Arc<LoadedPlugin>)>,
    /// Serializers by the content type they write, to decode responses.
    pub serializers: HashMap<String, Arc<SerializerPlugin>>,
    /// Every loaded selector by name (for methods whose governance names one).
    pub selectors: Arc<rustc_hash::FxHashMap<String, Arc<SelectorPlugin>>>,
    /// Every loaded router (each gets the endpoint table).
    pub routers: Vec<Arc<RouterPlugin>>,
    /// The health-scorer slot (one per client: the global slot, so two services never
    /// judge the same endpoint differently).
    pub scorer: Option<Arc<HealthScorerPlugin>>,
    pub services: rustc_hash::FxHashMap<String, Arc<ServiceSlots>>,
}

impl Loadout {
    /// Resolves `manifest` for `services`, loading (and self-checking) only the plugins
    /// that are not already running unchanged in `previous`.
    pub fn build(
        host: &PluginHost,
        manifest: Arc<Manifest>,
        services: &BTreeSet<String>,
        previous: Option<&Loadout>,
    ) -> anyhow::Result<(Loadout, SwapReport)> {
        // Only the plugins the services' slots name are loaded.
        let mut wanted = BTreeSet::new();
        for service in services {
            let slots = manifest.slots_for(service);
            wanted.extend(slots.serializer.clone());
            wanted.extend(slots.selector.clone());
            wanted.extend(slots.routers.clone().unwrap_or_default());
            wanted.extend(slots.client_interceptors.clone().unwrap_or_default());
            wanted.extend(slots.shadow_selector.clone());
            wanted.extend(slots.shadow_routers.clone().unwrap_or_default());
        }
        wanted.extend(manifest.slots_for("").health_scorer);
        let layers = std::iter::once(&manifest.governance)
            .chain(manifest.service_governance.values())
            .chain(manifest.method_governance.values());
        wanted.extend(
            layers
                .filter_map(|l| l.selector.clone())
                .filter(|n| !n.is_empty()),
        );
        let mut change = SwapReport::default();
        let mut plugins = BTreeMap::new();
        for name in wanted {
            let spec = manifest
                .plugins
                .get(&name)
                .with_context(|| format!("{}: no plugin `{name}`", manifest.file))?;
            let running = previous.and_then(|p| p.plugins.get(&name));
            // Going live while traffic flows (a swap), a new plugin answers for itself first.
            let reloaded = host.reload_if_changed(
                spec,
                running.map(|(old, loaded)| (old, &loaded.report.digest)),
                previous.is_some(),
            )?;
            let loaded = match (reloaded, running) {
                (Some(loaded), _) => {
                    change.loaded.push(name.clone());
                    Arc::new(loaded)
                }
                (None, Some((_, loaded))) => {
                    change.kept.push(name.clone());
                    loaded.clone()
                }
                (None, None) => anyhow::bail!("plugin `{name}`: neither running nor loaded"),
            };
            plugins.insert(name, (spec.clone(), loaded));
        }
        let plugin = |name: &str| plugins.get(name).map(|(_, p)| &p.plugin);

        let mut serializers = HashMap::new();
        let mut selectors = rustc_hash::FxHashMap::default();
        let mut routers = Vec::new();
        for (name, (_, p)) in &plugins {
            match &p.plugin {
                Plugin::Serializer(s) => {
                    serializers.insert(s.content_type().to_string(), s.clone());
                }
                Plugin::Selector(s) => {
                    selectors.insert(name.clone(), s.clone());
                }
                Plugin::Router(r) => routers.push(r.clone()),
                _ => {}
            }
        }
        let selectors = Arc::new(selectors);
        let scorer = match manifest
            .slots_for("")
            .health_scorer
            .as_deref()
            .and_then(plugin)
        {
            Some(Plugin::HealthScorer(h)) => Some(h.clone()),
            _ => None,
        };
        let mut by_service = rustc_hash::FxHashMap::default();
        for service in services {
            let slots = manifest.slots_for(service);
            let client_interceptors = slots
                .client_interceptors
                .iter()
                .flatten()
                .filter_map(|n| match plugin(n) {
                    Some(Plugin::Interceptor(i)) => Some(i.clone()),
                    _ => None,
                })
                .collect();
            let selector = match slots.selector.as_deref().and_then(plugin) {
                Some(Plugin::Selector(s)) => s.clone(),
                _ => bail!(
                    "{}: service `{service}` has no selector: set [slots] selector or [services.{service}.slots] selector",
                    manifest.file
                ),
            };
            let serializer = match slots.serializer.as_deref().and_then(plugin) {
                Some(Plugin::Serializer(s)) => Some(s.clone()),
                _ => None,
            };
            let service_routers: Vec<Arc<RouterPlugin>> = slots
                .routers
                .iter()
                .flatten()
                .filter_map(|n| match plugin(n) {
                    Some(Plugin::Router(r)) => Some(r.clone()),
                    _ => None,
                })
                .collect();
            let route_reads = service_routers
                .iter()
                .fold(axle_spi::RouteReads::default(), |all, r| {
                    all.union(r.reads())
                });
            by_service.insert(
                service.clone(),
                Arc::new(ServiceSlots {
                    serializer,
                    selector,
                    routers: service_routers,
                    route_reads,
                    selectors: selectors.clone(),
                    client_interceptors,
                    manifest: manifest.clone(),
                    shadow: shadows(service, &slots, &plugin, previous),
                }),
            );
        }
        Ok((
            Loadout {
                manifest,
                plugins,
                serializers,
                selectors,
                routers,
                scorer,
                services: by_service,
            },
            change,
        ))
    }
}

/// The shadow slots of `service` (none when it names no shadow). Counters are kept from
/// `previous` while a swap changes neither the shadow, the live plugin it is compared
/// with, nor the rate.
fn shadows<'a>(
    service: &str,
    slots: &axle_manifest::Slots,
    plugin: &dyn Fn(&str) -> Option<&'a Plugin>,
    previous: Option<&Loadout>,
) -> Option<Arc<Shadows>> {
    use axle_plugin_host::shadow::ShadowCounters;
    let rate = axle_manifest::shadow::sample(slots);
    let before = previous
        .and_then(|p| p.services.get(service))
        .and_then(|s| s.shadow.clone());
    let counters = |kind: &'static str, live: String, candidate: String| {
        let kept = before
            .iter()
            .flat_map(|s| s.counters())
            .find(|c| c.is(kind, service, &live, &candidate, rate));
        kept.cloned().unwrap_or_else(|| {
            Arc::new(ShadowCounters::new(kind, service, &live, &candidate, rate))
        })
    };
    let selector = slots.shadow_selector.as_deref().and_then(|name| {
        let Some(Plugin::Selector(s)) = plugin(name) else {
            return None;
        };
        let live = slots.selector.clone().unwrap_or_default();
        Some((s.clone(), counters("selector", live, name.to_string())))
    });
    let names = slots.shadow_routers.clone().unwrap_or_default();
    let chain: Vec<Arc<RouterPlugin>> = names
        .iter()
        .filter_map(|n| match plugin(n) {
            Some(Plugin::Router(r)) => Some(r.clone()),
            _ => None,
        })
        .collect();
    let route_fields = chain.iter().fold(Vec::new(), |mut all: Vec<String>, r| {
        for f in &r.reads().fields {
            if !all.contains(f) {
                all.push(f.clone());
            }
        }
        all
    });
    let routers = (!chain.is_empty()).then(|| {
        let live = slots.routers.clone().unwrap_or_default().join(",");
        (chain, counters("routers", live, names.join(",")))
    });
    if selector.is_none() && routers.is_none() {
        return None;
    }
    Some(Arc::new(Shadows {
        sampler: axle_plugin_host::shadow::Sampler::new(rate),
        selector,
        routers,
        route_fields,
    }))
}
