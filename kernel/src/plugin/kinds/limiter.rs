//! The limiter slot. Safe default: admit or reject, as the manifest's `on-error` says
//! (admit unless told otherwise: a broken limiter must not become an outage).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use wasmtime::component::InstancePre;
use wasmtime::Store;

use crate::plugin::bindings::{limiter as b, wit};
use crate::plugin::host_state::HostState;
use crate::plugin::pool::Pool;
use crate::plugin::sandbox::{Instance, Kind};
use crate::plugin::stats::Fault;

pub use b::axle::spi::limits::{Admission, LimitKey};

/// Marker for the limiter world.
pub struct LimiterKind;

impl Kind for LimiterKind {
    type Pre = b::LimiterPre<HostState>;
    type Bindings = b::Limiter;

    fn pre(pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre> {
        b::LimiterPre::new(pre)
    }

    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Self::Bindings> {
        pre.instantiate(store)
    }

    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, wit::ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings.call_init(store, config)
    }
}

/// Rejections from a failed limiter ask callers to come back after this long.
const FAIL_CLOSED_RETRY_AFTER_MS: u32 = 1000;

struct Slot {
    inst: Instance<LimiterKind>,
    /// Keys this instance has been told about (in id order), for replay.
    known: Vec<Arc<LimitKey>>,
}

/// A loaded limiter.
pub struct LimiterPlugin {
    pool: Pool<Slot>,
    on_error_admit: bool,
    /// Interned keys. Read per request, written once per new key.
    ids: RwLock<HashMap<LimitKey, u32>>,
    keys: RwLock<Vec<Arc<LimitKey>>>,
}

/// The answer of [`LimiterPlugin::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Admit or reject (with retry-after).
    pub admission: Admission,
    /// `false` when the plugin failed and `on-error` decided.
    pub by_plugin: bool,
}

impl LimiterPlugin {
    pub(crate) fn new(instances: Vec<Instance<LimiterKind>>, on_error_admit: bool) -> Self {
        LimiterPlugin {
            pool: Pool::new(
                instances
                    .into_iter()
                    .map(|inst| Slot {
                        inst,
                        known: Vec::new(),
                    })
                    .collect(),
            ),
            on_error_admit,
            ids: RwLock::new(HashMap::new()),
            keys: RwLock::new(Vec::new()),
        }
    }

    /// The id of `key`, interning it on first sight.
    pub fn key_id(&self, key: &LimitKey) -> u32 {
        if let Some(id) = self.ids.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            return *id;
        }
        let mut ids = self.ids.write().unwrap_or_else(|e| e.into_inner());
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        *ids.entry(key.clone()).or_insert_with(|| {
            keys.push(Arc::new(key.clone()));
            (keys.len() - 1) as u32
        })
    }

    /// Asks to admit `permits` under `key` (interned by [`LimiterPlugin::key_id`]).
    pub fn acquire(&self, key: u32, permits: u32) -> Admitted {
        self.pool.with(|slot| {
            let answer = self.catch_up(slot).and_then(|()| {
                slot.inst
                    .call("acquire", |b, s| b.call_acquire(s, key, permits))
            });
            match answer {
                Ok(admission) => Admitted {
                    admission,
                    by_plugin: true,
                },
                Err(_) => Admitted {
                    admission: if self.on_error_admit {
                        Admission::Admit
                    } else {
                        Admission::Reject(FAIL_CLOSED_RETRY_AFTER_MS)
                    },
                    by_plugin: false,
                },
            }
        })
    }

    /// Brings an instance up to date: a new instance hears every key again, a live one
    /// only the keys interned since it last heard.
    fn catch_up(&self, slot: &mut Slot) -> Result<(), Fault> {
        if !slot.inst.is_live() {
            let known = slot.known.clone();
            slot.inst.ensure(|bindings, store| {
                for (id, key) in known.iter().enumerate() {
                    bindings.call_key_defined(&mut *store, id as u32, key)?;
                }
                Ok(())
            })?;
        }
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        while slot.known.len() < keys.len() {
            let id = slot.known.len();
            let key = keys[id].clone();
            slot.inst
                .call("key-defined", |b, s| b.call_key_defined(s, id as u32, &key))?;
            slot.known.push(key);
        }
        Ok(())
    }
}
