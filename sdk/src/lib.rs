//! # axle-sdk — write Axle plugins in Rust
//!
//! A plugin is a type implementing one trait ([`Selector`], [`Router`], [`Serializer`],
//! [`HealthScorer`], [`Limiter`], [`Interceptor`]) plus one macro call that exports it as a component:
//!
//! ```ignore
//! use axle_sdk::*;
//!
//! pub struct First;
//!
//! impl Selector for First {
//!     type SetState = ();
//!     fn new(config: &Config) -> Result<Self, String> {
//!         config.reject_unknown(&[])?;
//!         Ok(First)
//!     }
//!     fn prepare(&mut self, _: &EndpointTable, _: &[EndpointId]) {}
//!     fn select(&mut self, set: &mut CandidateSet<()>, _key: u64) -> Option<EndpointId> {
//!         set.members.first().copied()
//!     }
//! }
//!
//! axle_sdk::export_selector!(First);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2` and the crate feature of its kind
//! (`features = ["selector"]`). Natively the same code runs in tests through the
//! runtimes ([`SelectorRuntime`], ...) and the fake host in [`testing`].

mod config;
pub mod host;
mod kinds;
mod rng;
pub mod testing;
#[cfg(feature = "serde")]
mod typed;
pub use axle_spi::*;

pub use config::{Config, ConfigValue};
pub use kinds::health_scorer::HealthScorer;
pub use kinds::interceptor::{call_at, point_named, points_from, Interceptor};
pub use kinds::limiter::{KeyEntry, Limiter, LimiterRuntime};
pub use kinds::router::{Router, RouterRuntime};
pub use kinds::selector::{CandidateSet, Selector, SelectorRuntime};
pub use kinds::serializer::{answer_buffer, Serializer};
pub use rng::Rng;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wasm;

/// Exports a [`Serializer`] as the component's `serializer` world (`packed-serializer`
/// with that feature).
#[macro_export]
macro_rules! export_serializer {
    ($plugin:ty) => {
        $crate::__axle_export!(
            $plugin,
            serializer,
            $plugin,
            __axle_export_serializer,
            __axle_packed_exports
        );
    };
}

/// The packed exports of a serializer built with `packed-serializer`, written by hand
/// (`wasm/packed_exports.rs`); `$slot` is the plugin's slot. Nothing without the feature.
#[cfg(feature = "packed-serializer")]
#[doc(hidden)]
#[macro_export]
macro_rules! __axle_packed_exports {
    ($slot:ty) => {
        #[unsafe(export_name = "encode-packed")]
        unsafe extern "C" fn __axle_encode_packed(ptr: *mut u8, len: usize) -> *mut u8 {
            // SAFETY: called by the host with a `list<u8>` argument, as the world declares.
            unsafe {
                $crate::wasm::packed_exports::call::<$slot>(ptr, len, |p, value| {
                    $crate::Serializer::encode_packed(p, value)
                })
            }
        }

        #[unsafe(export_name = "decode-packed")]
        unsafe extern "C" fn __axle_decode_packed(ptr: *mut u8, len: usize) -> *mut u8 {
            // SAFETY: as above.
            unsafe {
                $crate::wasm::packed_exports::call::<$slot>(ptr, len, |p, bytes| {
                    $crate::Serializer::decode_packed(p, bytes)
                })
            }
        }
    };
}

#[cfg(not(feature = "packed-serializer"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __axle_packed_exports {
    ($slot:ty) => {};
}

/// Exports a [`Selector`] as the component's `selector` world.
#[macro_export]
macro_rules! export_selector {
    ($plugin:ty) => {
        $crate::__axle_export!(
            $plugin,
            selector,
            $crate::SelectorRuntime<$plugin>,
            __axle_export_selector
        );
    };
}

/// Exports a [`Router`] as the component's `router` world.
#[macro_export]
macro_rules! export_router {
    ($plugin:ty) => {
        $crate::__axle_export!(
            $plugin,
            router,
            $crate::RouterRuntime<$plugin>,
            __axle_export_router
        );
    };
}

/// Exports a [`HealthScorer`] as the component's `health-scorer` world.
#[macro_export]
macro_rules! export_health_scorer {
    ($plugin:ty) => {
        $crate::__axle_export!($plugin, health_scorer, $plugin, __axle_export_health_scorer);
    };
}

/// Exports a [`Limiter`] as the component's `limiter` world.
#[macro_export]
macro_rules! export_limiter {
    ($plugin:ty) => {
        $crate::__axle_export!(
            $plugin,
            limiter,
            $crate::LimiterRuntime<$plugin>,
            __axle_export_limiter
        );
    };
}

/// Exports an [`Interceptor`] as the component's `interceptor` world.
#[macro_export]
macro_rules! export_interceptor {
    ($plugin:ty) => {
        $crate::__axle_export!($plugin, interceptor, $plugin, __axle_export_interceptor);
    };
}

/// The shared body of the `export_*!` macros: a per-instance slot holding the plugin's
/// runtime, and wit-bindgen's export of the kind's world for it.
#[doc(hidden)]
#[macro_export]
macro_rules! __axle_export {
    ($plugin:ty, $kind:ident, $runtime:ty, $export:ident $(, $extra:ident)?) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct AxleExport;
            impl $crate::wasm::$kind::Slot for AxleExport {
                type Plugin = $plugin;
                fn with<R>(f: impl FnOnce(&mut Option<$runtime>) -> R) -> R {
                    ::std::thread_local! {
                        static STATE: ::std::cell::RefCell<Option<$runtime>> =
                            const { ::std::cell::RefCell::new(None) };
                    }
                    STATE.with(|s| f(&mut s.borrow_mut()))
                }
            }
            $crate::wasm::$kind::bindings::$export!(
                AxleExport with_types_in $crate::wasm::$kind::bindings
            );
            $($crate::$extra!(AxleExport);)?
        };
    };
}
