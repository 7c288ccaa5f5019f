//! Hot-swap: changing strategies while traffic flows.
//!
//! Two ways in: the manifest file and the plugin files it names are watched (`watch.rs`),
//! and `axle swap SLOT PLUGIN` asks a running kernel through its admin endpoint. Either
//! way a [`Swapper`] builds the clients' new loadouts off the hot path — compiled through
//! the artifact cache, instantiated, configured, self-checked — and switches each client
//! atomically (`Client::swap`). A failed load keeps the old plugins and says why.

pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axle_client::Client;
use axle_manifest::Manifest;
use axle_plugin_host::PluginHost;

pub use axle_plugin_host::SwapReport;

/// Swaps the plugins of a set of clients, from a manifest file or on request.
pub struct Swapper {
    host: Arc<PluginHost>,
    /// The manifest file (none: the embedded one, which never changes).
    path: Option<PathBuf>,
    clients: Vec<Client>,
    /// Limiter slots of the servers in this process.
    servers: Vec<axle_server::LimiterSlot>,
    /// The manifest last applied (for servers-only kernels, which have no client to ask).
    manifest: Mutex<Option<Arc<Manifest>>>,
    /// Serialises swaps (a file change and a request at once apply one after the other).
    busy: Mutex<()>,
}

impl Swapper {
    pub fn new(host: Arc<PluginHost>, path: Option<PathBuf>, clients: Vec<Client>) -> Self {
        Swapper {
            host,
            path,
            clients,
            servers: Vec::new(),
            manifest: Mutex::new(None),
            busy: Mutex::new(()),
        }
    }

    /// Also swaps the limiter of a server of this process.
    pub fn with_server(mut self, slot: axle_server::LimiterSlot) -> Self {
        self.servers.push(slot);
        self
    }

    /// The watched manifest file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The manifest the kernel runs now: the last one applied, else the clients', else
    /// the one it started from (its file, or the embedded default).
    pub fn current(&self) -> anyhow::Result<Arc<Manifest>> {
        let applied = self
            .manifest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(m) = applied.or_else(|| self.clients.first().map(Client::manifest)) {
            return Ok(m);
        }
        Ok(Arc::new(Manifest::load_or_embedded(self.path.as_deref())?))
    }

    /// The slots this kernel can swap: a client's (serializer, selector, routers,
    /// health-scorer) if it has clients, a server's limiter if it has servers.
    pub fn slots(&self) -> Vec<&'static str> {
        let mut slots = Vec::new();
        if !self.clients.is_empty() {
            slots.extend(["serializer", "selector", "routers", "health-scorer"]);
            slots.push("client-interceptors");
        }
        if !self.servers.is_empty() {
            slots.extend(["limiter", "server-interceptors"]);
        }
        slots
    }

    /// Re-reads the manifest file and swaps to it.
    pub fn reload(&self) -> anyhow::Result<SwapReport> {
        let path = self
            .path
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("no manifest file to reload (the embedded one runs)"))?;
        let started = Instant::now();
        let manifest = Manifest::load(path)?;
        self.apply(manifest, started)
    }

    /// Fills `slot` with `plugin` (a plugin the running manifest declares) and swaps.
    /// `slot` is one of [`Swapper::slots`] (`routers` takes a comma-separated list); a
    /// client's slots may be prefixed by a service: `echo.selector`. A slot this kernel
    /// does not have is refused, naming the ones it has: a swap that changes nothing is
    /// never reported as done. Lasts until the manifest file changes.
    pub fn swap_slot(&self, slot: &str, plugin: &str) -> anyhow::Result<SwapReport> {
        let started = Instant::now();
        self.has_slot(slot)?;
        let current = self.current()?;
        let mut manifest = Manifest::clone(&current);
        fill_slot(&mut manifest, slot, plugin)?;
        self.apply(manifest, started)
    }

    /// Swaps to `manifest` as it is (a run-time rule laid over the one the kernel started
    /// from: `axle serve`'s limits). Lasts until the manifest file changes or another swap.
    pub fn swap_to(&self, manifest: Manifest) -> anyhow::Result<SwapReport> {
        self.apply(manifest, Instant::now())
    }

    /// `slot` is one this kernel fills, else an error naming the ones it does.
    fn has_slot(&self, slot: &str) -> anyhow::Result<()> {
        let have = self.slots();
        let (service, name) = match slot.rsplit_once('.') {
            Some((service, name)) => (Some(service), name),
            None => (None, slot),
        };
        let listed = if have.is_empty() {
            "none".to_string()
        } else {
            have.join(", ")
        };
        if !have.contains(&name) {
            anyhow::bail!(
                "this kernel has no `{name}` slot to swap (it has: {listed}; a server fills \
                 the limiter and server-interceptors, a client the serializer, selector, \
                 routers, health-scorer and client-interceptors)"
            );
        }
        if let (Some(service), "limiter") = (service, name) {
            anyhow::bail!(
                "a server's limiter guards every service: swap `limiter`, not `{service}.limiter`"
            );
        }
        Ok(())
    }

    fn apply(&self, manifest: Manifest, started: Instant) -> anyhow::Result<SwapReport> {
        let _one_at_a_time = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = SwapReport::default();
        for client in &self.clients {
            report.merge(client.swap(&self.host, manifest.clone())?);
        }
        for server in &self.servers {
            report.merge(server.swap(&self.host, &manifest)?);
        }
        *self.manifest.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(manifest));
        report.took_us = started.elapsed().as_micros() as u64;
        tracing::info!(
            loaded = ?report.loaded,
            took = ?Duration::from_micros(report.took_us),
            "plugins swapped"
        );
        Ok(report)
    }
}

/// Sets `slot` to `plugin` in `manifest`, checking the plugin exists and has the slot's
/// kind, and that no shadow is left sharing a live plugin (the table's own shadow going
/// live is promoted out of its shadow slot; `manifest` is the caller's copy, dropped on an
/// error).
pub fn fill_slot(manifest: &mut Manifest, slot: &str, plugin: &str) -> anyhow::Result<()> {
    use axle_manifest::PluginKind;
    let (service, slot_name) = match slot.rsplit_once('.') {
        Some((service, name)) => (Some(service), name),
        None => (None, slot),
    };
    let kind = match slot_name {
        "selector" => PluginKind::Selector,
        "serializer" => PluginKind::Serializer,
        "routers" => PluginKind::Router,
        "health-scorer" => PluginKind::HealthScorer,
        "limiter" => PluginKind::Limiter,
        "client-interceptors" | "server-interceptors" => PluginKind::Interceptor,
        other => anyhow::bail!(
            "no slot `{other}`: slots are selector, serializer, routers, health-scorer, limiter, client-interceptors, server-interceptors"
        ),
    };
    let names: Vec<String> = if matches!(kind, PluginKind::Router | PluginKind::Interceptor) {
        plugin
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect()
    } else {
        vec![plugin.to_string()]
    };
    for name in &names {
        let spec = manifest.plugins.get(name).ok_or_else(|| {
            anyhow::anyhow!("{}: no plugin `{name}` in the manifest", manifest.file)
        })?;
        if spec.kind != kind {
            anyhow::bail!(
                "plugin `{name}` is a {}, not a {kind} (slot `{slot}`)",
                spec.kind
            );
        }
    }
    let slots = match service {
        Some(s) => manifest.services.entry(s.to_string()).or_default(),
        None => &mut manifest.slots,
    };
    // A table's shadow going live is promoted: it leaves the shadow slot (a plugin never
    // decides live and in the shadow at once, `docs/shadow.md`).
    match kind {
        PluginKind::Selector if slots.shadow_selector.as_deref() == Some(plugin) => {
            slots.shadow_selector = None
        }
        PluginKind::Router if slots.shadow_routers.as_ref().is_some_and(|s| s == &names) => {
            slots.shadow_routers = None
        }
        PluginKind::Limiter if slots.shadow_limiter.as_deref() == Some(plugin) => {
            slots.shadow_limiter = None
        }
        _ => {}
    }
    match kind {
        PluginKind::Selector => slots.selector = Some(plugin.to_string()),
        PluginKind::Serializer => slots.serializer = Some(plugin.to_string()),
        PluginKind::Router => slots.routers = Some(names),
        PluginKind::HealthScorer => slots.health_scorer = Some(plugin.to_string()),
        PluginKind::Limiter => slots.limiter = Some(plugin.to_string()),
        PluginKind::Interceptor if slot_name == "client-interceptors" => {
            slots.client_interceptors = Some(names)
        }
        PluginKind::Interceptor => slots.server_interceptors = Some(names),
    }
    axle_manifest::shadow::check_apart(manifest)
        .map_err(|(key, reason)| anyhow::anyhow!("slot `{slot}`: {key}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_global_and_service_slots_and_checks_kinds() {
        let mut m = Manifest::embedded().unwrap();
        fill_slot(&mut m, "selector", "p2c-ewma").unwrap();
        assert_eq!(m.slots.selector.as_deref(), Some("p2c-ewma"));
        fill_slot(&mut m, "echo.selector", "random").unwrap();
        assert_eq!(m.slots_for("echo").selector.as_deref(), Some("random"));
        let err = fill_slot(&mut m, "selector", "json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a serializer, not a selector"), "{err}");
        let err = fill_slot(&mut m, "selector", "nope")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no plugin `nope`"), "{err}");
        let err = fill_slot(&mut m, "balancer", "random")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no slot `balancer`"), "{err}");
    }

    #[test]
    fn a_shadow_going_live_is_promoted_and_no_live_plugin_becomes_a_shadow_elsewhere() {
        let text = "[services.echo.slots]\nshadow-selector = \"random\"\n\
                    [services.kv.slots]\nshadow-selector = \"p2c-ewma\"\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(&path, text).unwrap();
        let mut m = Manifest::load(&path).unwrap();
        fill_slot(&mut m, "echo.selector", "random").unwrap();
        let echo = m.slots_for("echo");
        assert_eq!(echo.selector.as_deref(), Some("random"));
        assert_eq!(echo.shadow_selector, None, "promoted");
        // kv's shadow would decide live for echo as well: refused.
        let err = fill_slot(&mut m, "echo.selector", "p2c-ewma")
            .unwrap_err()
            .to_string();
        assert!(err.contains("services.kv.slots.shadow-selector"), "{err}");
    }

    #[test]
    fn fills_interceptor_chains_in_order() {
        let mut m = Manifest::embedded().unwrap();
        fill_slot(&mut m, "echo.client-interceptors", "tag-map, allow-apps").unwrap();
        let chain = m.slots_for("echo").client_interceptors;
        assert_eq!(chain, Some(vec!["tag-map".into(), "allow-apps".into()]));
        fill_slot(&mut m, "server-interceptors", "allow-apps").unwrap();
        assert_eq!(
            m.slots.server_interceptors,
            Some(vec!["allow-apps".to_string()])
        );
        let err = fill_slot(&mut m, "client-interceptors", "tag")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a router, not a interceptor"), "{err}");
    }
}
