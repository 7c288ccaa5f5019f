//! The server's swappable slots for hot-swap: the limiter, its shadow and the
//! `server-interceptors` chains.

use std::sync::Arc;

use crate::{stages, Pipeline};

/// A running server's swappable slots (limiter, its shadow, `server-interceptors`), for
/// hot-swap.
#[derive(Clone)]
pub struct LimiterSlot(pub(crate) Arc<Pipeline>);

impl LimiterSlot {
    /// Fills the slot from `manifest`'s `[slots] limiter`: a new or changed plugin is
    /// loaded and self-checked first; a new version of the running plugin (same name)
    /// gets its state (`export-state` → `import-state`, when both sides have them), so a
    /// token bucket keeps its tokens. Reports the plugin loaded, if any; on an error the
    /// running limiter stays. Interceptor chains swap first, whole (`intercept_chains.rs`).
    pub fn swap(
        &self,
        host: &axle_plugin_host::PluginHost,
        manifest: &axle_manifest::Manifest,
    ) -> anyhow::Result<axle_plugin_host::SwapReport> {
        let started = std::time::Instant::now();
        let mut report = stages::intercept_chains::swap(&self.0, host, manifest)?;
        report.merge(self.swap_limiter(host, manifest, started)?);
        report.merge(self.0.shadow_limiter.fill(host, manifest, true)?);
        report.took_us = started.elapsed().as_micros() as u64;
        Ok(report)
    }

    fn swap_limiter(
        &self,
        host: &axle_plugin_host::PluginHost,
        manifest: &axle_manifest::Manifest,
        started: std::time::Instant,
    ) -> anyhow::Result<axle_plugin_host::SwapReport> {
        let p = &self.0;
        let mut running = p.limiter_spec.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = manifest
            .slots
            .limiter
            .as_ref()
            .and_then(|n| manifest.plugins.get(n));
        let Some(spec) = wanted else {
            p.limiter.store(None);
            *running = None;
            return Ok(Default::default());
        };
        let Some(loaded) =
            host.reload_if_changed(spec, running.as_ref().map(|(s, d)| (s, d)), true)?
        else {
            return Ok(axle_plugin_host::SwapReport {
                kept: vec![spec.name.clone()],
                ..Default::default()
            });
        };
        let digest = loaded.report.digest;
        let axle_plugin_host::Plugin::Limiter(new) = loaded.plugin else {
            anyhow::bail!("plugin `{}` is not a limiter", spec.name);
        };
        let same_plugin = running.as_ref().is_some_and(|(r, _)| r.name == spec.name);
        if let (true, Some(old)) = (same_plugin, p.limiter.load_full()) {
            if let Some(state) = old.export_state() {
                let took = new.import_state(&state);
                tracing::info!(plugin = %spec.name, bytes = state.len(), took, "limiter state handed over");
            }
        }
        p.limiter.store(Some(new));
        *running = Some((spec.clone(), digest));
        Ok(axle_plugin_host::SwapReport {
            loaded: vec![spec.name.clone()],
            kept: Vec::new(),
            took_us: started.elapsed().as_micros() as u64,
        })
    }
}
