//! The one "reload if changed, then self-check" step of every hot-swap, client or server:
//! a plugin whose spec and component bytes are unchanged keeps running; anything else is
//! loaded anew and, if it is to go live under traffic, must answer its self-check before
//! anything can call it.

use crate::{component_changed, selfcheck, LoadedPlugin, PluginHost, PluginSpec};

/// What a swap did, wherever it ran (a client's loadout, a server's limiter slot, a
/// whole kernel): the one report every swap returns and `axle swap` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SwapReport {
    /// Plugins loaded (new, or changed in spec or component bytes).
    pub loaded: Vec<String>,
    /// Plugins that kept running unchanged.
    pub kept: Vec<String>,
    /// From the request (or the file change being noticed) to the new plugins serving.
    pub took_us: u64,
}

impl SwapReport {
    /// Adds another part's names (sorted, each once); the time is the caller's to set.
    pub fn merge(&mut self, other: SwapReport) {
        for (mine, theirs) in [
            (&mut self.loaded, other.loaded),
            (&mut self.kept, other.kept),
        ] {
            mine.extend(theirs);
            mine.sort();
            mine.dedup();
        }
    }
}

impl PluginHost {
    /// `None`: `running` (the spec and component digest the running plugin came from) is
    /// this very plugin, unchanged, and it stays. `Some`: a freshly loaded plugin, checked
    /// with one real call per hot function when `live` (it replaces a running one while
    /// calls flow). On an error nothing was replaced and the error names the plugin.
    pub fn reload_if_changed(
        &self,
        spec: &PluginSpec,
        running: Option<(&PluginSpec, &[u8; 32])>,
        live: bool,
    ) -> anyhow::Result<Option<LoadedPlugin>> {
        if let Some((old, digest)) = running {
            if old == spec && !component_changed(spec, digest) {
                return Ok(None);
            }
        }
        let loaded = self.load(spec)?;
        if live {
            selfcheck::run(&loaded)
                .map_err(|e| anyhow::anyhow!("plugin `{}` self-check: {e}", spec.name))?;
        }
        Ok(Some(loaded))
    }
}
