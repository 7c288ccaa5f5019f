//! Limiters admit or reject requests per key.

use crate::{Admission, Config, LimitKey};

/// A key the kernel introduced, with the plugin's per-key state.
pub struct KeyEntry<S> {
    /// What the key is made of.
    pub attributes: LimitKey,
    /// What the plugin keeps for it (a bucket, a window, ...).
    pub state: S,
}

/// An admission policy. Implement this and call [`crate::export_limiter!`].
pub trait Limiter: Sized + 'static {
    /// Per-key state, created when the kernel introduces the key.
    type KeyState: 'static;
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;
    /// Creates the state for a new key.
    fn prepare(&mut self, attributes: &LimitKey) -> Self::KeyState;
    /// Admits or rejects `permits` units under `key`.
    fn acquire(&mut self, key: &mut KeyEntry<Self::KeyState>, permits: u32) -> Admission;
}

/// The most keys a limiter keeps; ids at or above it are admitted by the runtime.
pub const MAX_KEYS: usize = 1 << 20;

/// Keeps the keys for a [`Limiter`].
pub struct LimiterRuntime<T: Limiter> {
    plugin: T,
    keys: Vec<Option<KeyEntry<T::KeyState>>>,
}

impl<T: Limiter> LimiterRuntime<T> {
    /// `init`.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(LimiterRuntime {
            plugin: T::new(config)?,
            keys: Vec::new(),
        })
    }

    /// `key-defined`.
    pub fn key_defined(&mut self, key: u32, attributes: LimitKey) {
        let slot = key as usize;
        if slot >= MAX_KEYS {
            return;
        }
        if self.keys.len() <= slot {
            self.keys.resize_with(slot + 1, || None);
        }
        let state = self.plugin.prepare(&attributes);
        self.keys[slot] = Some(KeyEntry { attributes, state });
    }

    /// `acquire`. An unknown key is admitted: the kernel always defines keys first, so
    /// this only happens on a kernel bug, which must not turn into an outage.
    pub fn acquire(&mut self, key: u32, permits: u32) -> Admission {
        match self.keys.get_mut(key as usize).and_then(|k| k.as_mut()) {
            Some(entry) => self.plugin.acquire(entry, permits),
            None => Admission::Admit,
        }
    }
}
