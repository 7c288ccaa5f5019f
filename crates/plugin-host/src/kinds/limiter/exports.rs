//! What a limiter component exports, resolved once: its world's functions, and the
//! optional ones of the worlds that extend it (`concurrency-limiter`'s `release`,
//! `leasing-limiter`'s `acquire-lease`), found per component and typed per instance. Looked
//! up and type-checked on every call instead, they cost about 50 ns of a lease's call
//! (`docs/performance.md`, "Optional exports typed once"), and `release` is called for
//! every admitted request.

use wasmtime::component::{ComponentExportIndex, InstancePre, TypedFunc};
use wasmtime::Store;

use crate::bindings::limiter as b;
use crate::bindings::wit;
use crate::host_state::HostState;
use crate::sandbox::typed_export;

/// Marker for the limiter world (and the worlds that extend it).
pub struct LimiterKind;

/// A limiter instance's typed exports: its world's, and the optional ones the component
/// has.
pub struct LimiterExports {
    pub(super) world: b::Limiter,
    pub(super) release: Option<TypedFunc<(u32, u32, u64, bool), ()>>,
    pub(super) acquire_lease: Option<TypedFunc<(u32, u64), (u64,)>>,
}

/// Where a limiter's optional exports are, found once per component.
#[derive(Clone)]
pub struct OptionalExports {
    release: Option<ComponentExportIndex>,
    acquire_lease: Option<ComponentExportIndex>,
}

impl crate::sandbox::Kind for LimiterKind {
    type Pre = (b::LimiterPre<HostState>, OptionalExports);
    type Bindings = LimiterExports;

    fn pre(pre: InstancePre<HostState>, _component: &[u8]) -> wasmtime::Result<Self::Pre> {
        let optional = OptionalExports {
            release: pre.component().get_export_index(None, "release"),
            acquire_lease: pre.component().get_export_index(None, "acquire-lease"),
        };
        Ok((b::LimiterPre::new(pre)?, optional))
    }

    fn instantiate(
        (pre, optional): &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)> {
        let instance = pre.instance_pre().instantiate(&mut *store)?;
        let world = b::Limiter::new(&mut *store, &instance)?;
        // A `release` of another type is refused here, so the component does not load.
        let release = typed_export(&instance, store, &optional.release)?;
        // An `acquire-lease` of another type is not called: the limiter is asked as a
        // plain one, as `lease::export` tells the log.
        let acquire_lease = typed_export(&instance, store, &optional.acquire_lease)
            .ok()
            .flatten();
        Ok((
            LimiterExports {
                world,
                release,
                acquire_lease,
            },
            instance,
        ))
    }

    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, wit::ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings.world.call_init(store, config)
    }
}
