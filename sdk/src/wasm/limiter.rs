use crate::kinds::limiter::{Limiter, LimiterRuntime};

#[cfg(not(feature = "stateful-limiter"))]
world_bindings!(
    "axle:spi/limiter",
    "__axle_export_limiter",
    "axle_sdk::wasm::limiter::bindings"
);

// The same kind with the optional state handoff exports.
#[cfg(all(
    feature = "stateful-limiter",
    not(feature = "concurrency-limiter"),
    not(feature = "cluster-limiter"),
    not(feature = "leasing-limiter")
))]
world_bindings!(
    "axle:spi/stateful-limiter",
    "__axle_export_limiter",
    "axle_sdk::wasm::limiter::bindings"
);

// The same kind with state handoff and `release` (how each admitted request ended).
#[cfg(feature = "concurrency-limiter")]
world_bindings!(
    "axle:spi/concurrency-limiter",
    "__axle_export_limiter",
    "axle_sdk::wasm::limiter::bindings"
);

// The same kind with state handoff and `providers-changed` (providers per service).
#[cfg(all(feature = "cluster-limiter", not(feature = "concurrency-limiter")))]
world_bindings!(
    "axle:spi/cluster-limiter",
    "__axle_export_limiter",
    "axle_sdk::wasm::limiter::bindings"
);

// The same kind with state handoff and `acquire-lease` (a run of admissions in one answer).
#[cfg(all(
    feature = "leasing-limiter",
    not(feature = "concurrency-limiter"),
    not(feature = "cluster-limiter")
))]
world_bindings!(
    "axle:spi/leasing-limiter",
    "__axle_export_limiter",
    "axle_sdk::wasm::limiter::bindings"
);

#[cfg(all(feature = "cluster-limiter", feature = "concurrency-limiter"))]
compile_error!("a limiter is a concurrency-limiter or a cluster-limiter, not both");

// A lease admits requests the plugin never hears of: a concurrency limit must see each
// one end, and a cluster share moves under a lease already given.
#[cfg(all(
    feature = "leasing-limiter",
    any(feature = "concurrency-limiter", feature = "cluster-limiter")
))]
compile_error!("a leasing-limiter is neither a concurrency-limiter nor a cluster-limiter");

use crate::wasm::base::axle::spi::types as wit;
use bindings::axle::spi::limits;

pub trait Slot {
    type Plugin: Limiter;
    fn with<R>(f: impl FnOnce(&mut Option<LimiterRuntime<Self::Plugin>>) -> R) -> R;
}

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let runtime = LimiterRuntime::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(runtime));
        Ok(())
    }

    fn key_defined(key: u32, attributes: limits::LimitKey) {
        let attributes = crate::LimitKey {
            service: attributes.service,
            method: attributes.method,
            consumer_app: attributes.consumer_app,
            consumer_ip: attributes.consumer_ip,
        };
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.key_defined(key, attributes)
            }
        })
    }

    #[cfg(feature = "stateful-limiter")]
    fn export_state() -> Vec<u8> {
        S::with(|slot| {
            slot.as_ref()
                .map(|rt| rt.export_state())
                .unwrap_or_default()
        })
    }

    #[cfg(feature = "stateful-limiter")]
    fn import_state(state: Vec<u8>) {
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.import_state(&state)
            }
        })
    }

    #[cfg(feature = "concurrency-limiter")]
    fn release(key: u32, permits: u32, latency_ns: u64, dropped: bool) {
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.release(key, permits, latency_ns, dropped)
            }
        })
    }

    #[cfg(all(feature = "cluster-limiter", not(feature = "concurrency-limiter")))]
    fn providers_changed(service: String, providers: u32) {
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.providers_changed(&service, providers)
            }
        })
    }

    /// 0 admits; a refusal is its retry-after, at least 1 ms (0 would read as admitted).
    fn acquire(key: u32, permits: u32, now_ns: u64) -> u32 {
        scalar(S::with(|slot| {
            slot.as_mut().map(|rt| rt.acquire_at(key, permits, now_ns))
        }))
    }

    /// `acquire`'s answer in the low half; an admission's lease in the high half.
    #[cfg(feature = "leasing-limiter")]
    fn acquire_lease(key: u32, now_ns: u64) -> u64 {
        let (admission, lease) = S::with(|slot| match slot.as_mut() {
            Some(rt) => rt.acquire_lease(key, now_ns),
            None => (crate::Admission::Admit, 0),
        });
        u64::from(scalar(Some(admission))) | u64::from(lease) << 32
    }
}

/// `acquire`'s scalar: 0 admits (as does no runtime: `init` failed, and the kernel's
/// `on-error` is for the plugin's faults, not this); a refusal is its retry-after, at
/// least 1 ms (0 would read as admitted).
fn scalar(admission: Option<crate::Admission>) -> u32 {
    match admission {
        Some(crate::Admission::Reject { retry_after_ms }) => retry_after_ms.max(1),
        _ => 0,
    }
}
