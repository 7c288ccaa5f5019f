use crate::kinds::selector::{Selector, SelectorRuntime};

#[cfg(all(feature = "two-choice-selector", feature = "learning-selector"))]
compile_error!(
    "a selector is `two-choice-selector` or `learning-selector`, not both: a two-choice \
     selector's measure reads the kernel's facts, which already sum up every outcome"
);

#[cfg(all(
    feature = "run-selector",
    any(feature = "two-choice-selector", feature = "learning-selector")
))]
compile_error!(
    "a `run-selector` is neither `two-choice-selector` nor `learning-selector`: its picks \
     must depend on nothing but the set and its own state, so a run can be made ahead"
);

#[cfg(not(any(
    feature = "two-choice-selector",
    feature = "learning-selector",
    feature = "run-selector"
)))]
world_bindings!(
    "axle:spi/selector",
    "__axle_export_selector",
    "axle_sdk::wasm::selector::bindings"
);

// The same kind offering two candidates for the kernel to compare (`measure`,
// `select-two`).
#[cfg(all(
    feature = "two-choice-selector",
    not(feature = "two-choice-run-selector")
))]
world_bindings!(
    "axle:spi/two-choice-selector",
    "__axle_export_selector",
    "axle_sdk::wasm::selector::bindings"
);

// The same, answering two pairs at a time (`select-two-run`).
#[cfg(feature = "two-choice-run-selector")]
world_bindings!(
    "axle:spi/two-choice-run-selector",
    "__axle_export_selector",
    "axle_sdk::wasm::selector::bindings"
);

// The same kind, hearing how its picks ended (`feedback`).
#[cfg(feature = "learning-selector")]
world_bindings!(
    "axle:spi/learning-selector",
    "__axle_export_selector",
    "axle_sdk::wasm::selector::bindings"
);

// The same kind answering runs of picks (`select-run`).
#[cfg(all(
    feature = "run-selector",
    not(any(feature = "two-choice-selector", feature = "learning-selector"))
))]
world_bindings!(
    "axle:spi/run-selector",
    "__axle_export_selector",
    "axle_sdk::wasm::selector::bindings"
);

use crate::wasm::base::axle::spi::types as wit;

/// Where the export macro keeps the plugin (one instance per component instance).
pub trait Slot {
    type Plugin: Selector;
    fn with<R>(f: impl FnOnce(&mut Option<SelectorRuntime<Self::Plugin>>) -> R) -> R;
}

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let runtime = SelectorRuntime::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(runtime));
        Ok(())
    }

    fn endpoints_changed(table: wit::EndpointTable) {
        let table = crate::wasm::table(table);
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.endpoints_changed(table)
            }
        })
    }

    fn define_set(set: u32, members: Vec<u32>) {
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.define_set(set, members)
            }
        })
    }

    fn select(set: u32, hash_key: u64) -> u32 {
        S::with(|slot| slot.as_mut().and_then(|rt| rt.select(set, hash_key)))
            .unwrap_or(crate::NO_PICK)
    }

    #[cfg(all(
        feature = "run-selector",
        not(any(feature = "two-choice-selector", feature = "learning-selector"))
    ))]
    fn select_run(set: u32) -> u64 {
        S::with(|slot| slot.as_mut().map(|rt| rt.select_run(set))).unwrap_or(u64::MAX)
    }

    #[cfg(feature = "two-choice-selector")]
    fn measure() -> Option<bindings::axle::spi::balancing::LoadMeasure> {
        S::with(|slot| slot.as_ref().and_then(|rt| rt.measure())).map(|m| {
            bindings::axle::spi::balancing::LoadMeasure {
                per_weight: m.per_weight,
                latency: m.latency,
                default_latency_ns: m.default_latency_ns,
            }
        })
    }

    #[cfg(feature = "two-choice-selector")]
    fn select_two(set: u32, hash_key: u64) -> u64 {
        S::with(|slot| slot.as_mut().map(|rt| rt.select_two(set, hash_key))).unwrap_or(u64::MAX)
    }

    #[cfg(feature = "two-choice-run-selector")]
    fn select_two_run(set: u32) -> u64 {
        S::with(|slot| slot.as_mut().map(|rt| rt.select_two_run(set))).unwrap_or(u64::MAX)
    }

    #[cfg(feature = "learning-selector")]
    fn feedback(outcomes: Vec<wit::Outcome>) {
        let outcomes: Vec<_> = outcomes.iter().map(crate::wasm::outcome).collect();
        S::with(|slot| {
            if let Some(rt) = slot {
                rt.feedback(&outcomes)
            }
        })
    }
}
