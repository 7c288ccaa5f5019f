//! What a selector component exports, resolved once: its world's functions, and the
//! optional ones of the worlds that extend it (`two-choice-selector`'s `select-two`,
//! `run-selector`'s `select-run`, `two-choice-run-selector`'s `select-two-run`,
//! `learning-selector`'s `feedback`), found per component and typed per instance, so no
//! pick looks an export up by name.

use wasmtime::component::{ComponentExportIndex, Func, InstancePre, TypedFunc};
use wasmtime::Store;

use crate::bindings::selector as wit_selector;
use crate::bindings::wit;
use crate::host_state::HostState;
use crate::sandbox::typed_export;

/// Marker for the selector world (and the worlds that extend it).
pub struct SelectorKind;

/// A selector instance's typed exports: its world's, and the optional ones the component
/// has (resolved once per instance, not per pick).
pub struct SelectorExports {
    pub(super) world: wit_selector::Selector,
    pub(super) select_two: Option<TypedFunc<(u32, u64), (u64,)>>,
    pub(super) select_run: Option<TypedFunc<(u32,), (u64,)>>,
    pub(super) select_two_run: Option<TypedFunc<(u32,), (u64,)>>,
    /// Typed at each batch: its argument borrows the batch.
    pub(super) feedback: Option<Func>,
}

/// Where a selector's optional exports are, found once per component.
#[derive(Clone)]
pub struct OptionalExports {
    pub(super) select_two: Option<ComponentExportIndex>,
    pub(super) select_run: Option<ComponentExportIndex>,
    pub(super) select_two_run: Option<ComponentExportIndex>,
    pub(super) feedback: Option<ComponentExportIndex>,
}

impl crate::sandbox::Kind for SelectorKind {
    type Pre = (wit_selector::SelectorPre<HostState>, OptionalExports);
    type Bindings = SelectorExports;

    fn pre(pre: InstancePre<HostState>, _component: &[u8]) -> wasmtime::Result<Self::Pre> {
        let optional = OptionalExports {
            select_two: pre.component().get_export_index(None, "select-two"),
            select_run: pre.component().get_export_index(None, "select-run"),
            select_two_run: pre.component().get_export_index(None, "select-two-run"),
            feedback: pre.component().get_export_index(None, "feedback"),
        };
        Ok((wit_selector::SelectorPre::new(pre)?, optional))
    }

    fn instantiate(
        (pre, optional): &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)> {
        let instance = pre.instance_pre().instantiate(&mut *store)?;
        let world = wit_selector::Selector::new(&mut *store, &instance)?;
        // An export of another type is refused here, so the component does not load.
        let select_two = typed_export(&instance, store, &optional.select_two)?;
        let select_run = typed_export(&instance, store, &optional.select_run)?;
        let select_two_run = typed_export(&instance, store, &optional.select_two_run)?;
        let feedback = match &optional.feedback {
            Some(index) => {
                let func = instance
                    .get_func(&mut *store, index)
                    .ok_or_else(|| wasmtime::format_err!("`feedback` is not a function"))?;
                func.typed::<(&[wit::Outcome],), ()>(&*store)?;
                Some(func)
            }
            None => None,
        };
        Ok((
            SelectorExports {
                world,
                select_two,
                select_run,
                select_two_run,
                feedback,
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
