//! The provider's interceptor chains: which `server-interceptors` each served service
//! runs (its own slot, else the global one), built when the server binds and replaced
//! whole by a hot-swap. A request uses the chains it loaded; a swap reloads only the
//! interceptors whose entry or component changed (self-checked before they serve), keeps
//! the rest running — with their memos — and drops the ones no chain names any more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use anyhow::Context as _;
use rustc_hash::FxHashMap;

use axle_manifest::{Manifest, PluginSpec};
use axle_plugin_host::kinds::interceptor::InterceptorPlugin;
use axle_plugin_host::{Plugin, PluginHost, SwapReport};

use crate::Pipeline;

/// The loaded interceptors by manifest name, with the entry and component digest each
/// came from (to tell a changed one on a swap).
pub type Running = BTreeMap<String, (PluginSpec, [u8; 32], Arc<InterceptorPlugin>)>;

/// Every served service's chain.
#[derive(Default)]
pub struct Chains {
    by_service: FxHashMap<String, Vec<Arc<InterceptorPlugin>>>,
    running: Running,
}

impl Chains {
    /// The chains of `services` under `manifest`, from the `running` interceptors.
    pub fn build(manifest: Option<&Manifest>, running: Running, services: &[String]) -> Chains {
        let by_service = match manifest {
            None => FxHashMap::default(),
            Some(m) => services
                .iter()
                .filter_map(|service| {
                    let chain: Vec<_> = m
                        .slots_for(service)
                        .server_interceptors
                        .iter()
                        .flatten()
                        .filter_map(|name| running.get(name).map(|r| r.2.clone()))
                        .collect();
                    (!chain.is_empty()).then(|| (service.clone(), chain))
                })
                .collect(),
        };
        Chains {
            by_service,
            running,
        }
    }

    /// The chain of `service` (empty: none).
    pub fn of(&self, service: &str) -> &[Arc<InterceptorPlugin>] {
        self.by_service
            .get(service)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Whether no service has a chain.
    pub fn is_empty(&self) -> bool {
        self.by_service.is_empty()
    }

    /// Every loaded interceptor, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<InterceptorPlugin>> {
        self.running.values().map(|r| &r.2)
    }
}

/// The interceptors some `server-interceptors` slot of `manifest` names.
pub fn named(manifest: &Manifest) -> BTreeSet<&str> {
    std::iter::once(&manifest.slots)
        .chain(manifest.services.values())
        .flat_map(|s| s.server_interceptors.iter().flatten())
        .map(String::as_str)
        .collect()
}

/// The chains the request path uses now (`None`: no service has one, and nothing was
/// loaded: one relaxed load per request).
pub fn now(p: &Pipeline) -> Option<Arc<Chains>> {
    p.intercepting
        .load(Relaxed)
        .then(|| p.interceptors.load_full())
}

/// Replaces the chains with `manifest`'s. On an error (an entry missing, a plugin that
/// does not load or fails its self-check) the running chains stay.
pub fn swap(p: &Pipeline, host: &PluginHost, manifest: &Manifest) -> anyhow::Result<SwapReport> {
    let old = p.interceptors.load_full();
    let mut running = Running::new();
    let mut report = SwapReport::default();
    for name in named(manifest) {
        let spec = manifest
            .plugins
            .get(name)
            .with_context(|| format!("{}: no plugin `{name}`", manifest.file))?;
        let before = old.running.get(name);
        let kept = before.map(|(s, d, _)| (s, d));
        let entry = match host.reload_if_changed(spec, kept, true)? {
            Some(loaded) => {
                let Plugin::Interceptor(new) = loaded.plugin else {
                    anyhow::bail!("plugin `{name}` is not an interceptor");
                };
                report.loaded.push(name.to_string());
                (spec.clone(), loaded.report.digest, new)
            }
            None => {
                report.kept.push(name.to_string());
                before.cloned().context("a kept interceptor is running")?
            }
        };
        running.insert(name.to_string(), entry);
    }
    let mut services: Vec<String> = p
        .handlers
        .keys()
        .chain(p.any_method.keys())
        .cloned()
        .collect();
    services.sort();
    services.dedup();
    let chains = Chains::build(Some(manifest), running, &services);
    p.intercepting.store(!chains.is_empty(), Relaxed);
    p.interceptors.store(Arc::new(chains));
    Ok(report)
}
