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
    /// Admits or rejects `permits` units under `key`. `now_ns` is the kernel's clock as it
    /// asked (the one [`crate::host::now_ns`] reads), so a limiter needs no host call for
    /// the time.
    fn acquire(
        &mut self,
        key: &mut KeyEntry<Self::KeyState>,
        permits: u32,
        now_ns: u64,
    ) -> Admission;

    /// Hot-swap handoff (built with the `stateful-limiter` feature): one key's state as
    /// bytes for the next version of this plugin. `None`: nothing worth keeping.
    fn save(&self, _state: &Self::KeyState) -> Option<Vec<u8>> {
        None
    }

    /// The next version's side: a key's state rebuilt from what [`Limiter::save`] gave
    /// (`None`: start the key fresh with [`Limiter::prepare`]).
    fn restore(&mut self, _attributes: &LimitKey, _saved: &[u8]) -> Option<Self::KeyState> {
        None
    }

    /// A request admitted under `key` ended (built with the `concurrency-limiter` feature,
    /// the kernel calls it once per admission): `latency_ns` after it was admitted, and
    /// whether it was `dropped` (timed out, refused after admission, failed inside the
    /// provider, or its caller went away). A limiter whose limit follows what it measures
    /// learns here; the default forgets it, which is right for a rate.
    fn release(
        &mut self,
        _key: &mut KeyEntry<Self::KeyState>,
        _permits: u32,
        _latency_ns: u64,
        _dropped: bool,
    ) {
    }

    /// How many more requests under `key` the kernel may admit without asking, just after
    /// this plugin admitted one there at `now_ns` (built with the `leasing-limiter`
    /// feature). The kernel admits them on the thread that asked, for at most
    /// [`crate::LEASE_NS`] of its clock, and drops what is left then: take what you lease from
    /// `key`'s state now, and lease only what you can spare (a rate far from its limit),
    /// since a lease not used in time is lost. The default leases nothing: the kernel asks
    /// again for the next request.
    fn lease(&mut self, _key: &mut KeyEntry<Self::KeyState>, _now_ns: u64) -> u32 {
        0
    }

    /// `service` is served by `providers` providers now (built with the `cluster-limiter`
    /// feature; the kernel calls it when the count changes, before the next `acquire`). A
    /// limiter sharing a cluster-wide rate out takes its part here; the default ignores
    /// it. A service never told counts as one provider.
    fn providers_changed(&mut self, _service: &str, _providers: u32) {}
}

/// The most keys a limiter keeps; ids at or above it are admitted by the runtime.
pub const MAX_KEYS: usize = 1 << 20;

/// Keeps the keys for a [`Limiter`].
pub struct LimiterRuntime<T: Limiter> {
    plugin: T,
    keys: Vec<Option<KeyEntry<T::KeyState>>>,
    /// State handed over by the previous version, by key, until the kernel defines it.
    handed: std::collections::HashMap<LimitKey, Vec<u8>>,
}

impl<T: Limiter> LimiterRuntime<T> {
    /// `init`.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(LimiterRuntime {
            plugin: T::new(config)?,
            keys: Vec::new(),
            handed: std::collections::HashMap::new(),
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
        let handed = self
            .handed
            .remove(&attributes)
            .and_then(|saved| self.plugin.restore(&attributes, &saved));
        let state = match handed {
            Some(state) => state,
            None => self.plugin.prepare(&attributes),
        };
        self.keys[slot] = Some(KeyEntry { attributes, state });
    }

    /// `export-state`: every key's attributes and saved state, length-prefixed.
    pub fn export_state(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for entry in self.keys.iter().flatten() {
            if let Some(saved) = self.plugin.save(&entry.state) {
                let a = &entry.attributes;
                for field in [
                    a.service.as_bytes(),
                    a.method.as_bytes(),
                    a.consumer_app.as_bytes(),
                    a.consumer_ip.as_bytes(),
                    &saved,
                ] {
                    out.extend_from_slice(&(field.len() as u32).to_le_bytes());
                    out.extend_from_slice(field);
                }
            }
        }
        out
    }

    /// `import-state`: keeps what [`LimiterRuntime::export_state`] wrote until the keys
    /// are defined. Malformed input is dropped whole (a fresh start, never a trap).
    pub fn import_state(&mut self, mut bytes: &[u8]) {
        fn field<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
            let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
            let value = bytes.get(4..4 + len)?;
            *bytes = &bytes[4 + len..];
            Some(value)
        }
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
        let mut handed = std::collections::HashMap::new();
        while !bytes.is_empty() {
            let parsed = (|| {
                let key = LimitKey {
                    service: text(field(&mut bytes)?)?,
                    method: text(field(&mut bytes)?)?,
                    consumer_app: text(field(&mut bytes)?)?,
                    consumer_ip: text(field(&mut bytes)?)?,
                };
                Some((key, field(&mut bytes)?.to_vec()))
            })();
            match parsed {
                Some((key, saved)) => {
                    handed.insert(key, saved);
                }
                None => return,
            }
        }
        self.handed = handed;
    }

    /// `release`. An unknown key is ignored (nothing was admitted under it).
    pub fn release(&mut self, key: u32, permits: u32, latency_ns: u64, dropped: bool) {
        if let Some(entry) = self.keys.get_mut(key as usize).and_then(|k| k.as_mut()) {
            self.plugin.release(entry, permits, latency_ns, dropped)
        }
    }

    /// `providers-changed`. A count of 0 is taken as 1: a provider hearing it serves.
    pub fn providers_changed(&mut self, service: &str, providers: u32) {
        self.plugin.providers_changed(service, providers.max(1))
    }

    /// `acquire` at the host's clock now (natively: the testing clock).
    pub fn acquire(&mut self, key: u32, permits: u32) -> Admission {
        self.acquire_at(key, permits, crate::host::now_ns())
    }

    /// `acquire-lease`: one permit under `key`, and when it is admitted, the lease the
    /// plugin gives with it (0 for an unknown key: it is admitted, and asked again).
    pub fn acquire_lease(&mut self, key: u32, now_ns: u64) -> (Admission, u32) {
        match self.keys.get_mut(key as usize).and_then(|k| k.as_mut()) {
            Some(entry) => match self.plugin.acquire(entry, 1, now_ns) {
                Admission::Admit => (Admission::Admit, self.plugin.lease(entry, now_ns)),
                refused => (refused, 0),
            },
            None => (Admission::Admit, 0),
        }
    }

    /// `acquire`, with the time the kernel gave. An unknown key is admitted: the kernel
    /// always defines keys first, so this only happens on a kernel bug, which must not
    /// turn into an outage.
    pub fn acquire_at(&mut self, key: u32, permits: u32, now_ns: u64) -> Admission {
        match self.keys.get_mut(key as usize).and_then(|k| k.as_mut()) {
            Some(entry) => self.plugin.acquire(entry, permits, now_ns),
            None => Admission::Admit,
        }
    }
}
