//! One file per plugin kind: its world's bindings, how the kernel calls it, and its safe
//! default when the plugin fails.

/// Implements the sandbox's `Kind` for a plugin world: the generated `…Pre` checks the
/// component's exports against the world, `instantiate` makes the typed bindings, and
/// `init` hands the plugin its config.
macro_rules! world_kind {
    ($marker:ident, $module:ident, $bindings:ident, $pre:ident, $doc:literal) => {
        #[doc = concat!("Marker for the ", $doc, ".")]
        pub struct $marker;

        impl crate::sandbox::Kind for $marker {
            type Pre = crate::bindings::$module::$pre<crate::host_state::HostState>;
            type Bindings = crate::bindings::$module::$bindings;

            fn pre(
                pre: wasmtime::component::InstancePre<crate::host_state::HostState>,
                _component: &[u8],
            ) -> wasmtime::Result<Self::Pre> {
                crate::bindings::$module::$pre::new(pre)
            }

            fn instantiate(
                pre: &Self::Pre,
                store: &mut wasmtime::Store<crate::host_state::HostState>,
            ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)> {
                let instance = pre.instance_pre().instantiate(&mut *store)?;
                let bindings = crate::bindings::$module::$bindings::new(&mut *store, &instance)?;
                Ok((bindings, instance))
            }

            fn init(
                bindings: &Self::Bindings,
                store: &mut wasmtime::Store<crate::host_state::HostState>,
                config: &Vec<(String, crate::bindings::wit::ConfigValue)>,
            ) -> wasmtime::Result<Result<(), String>> {
                bindings.call_init(store, config)
            }
        }
    };
}
pub(crate) use world_kind;

pub mod floor;
pub mod health_scorer;
mod intercept_contract;
pub mod interceptor;
pub mod limiter;
pub mod router;
pub mod selector;
pub mod serializer;
