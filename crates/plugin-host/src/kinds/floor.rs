//! The bench floor (`plugins/floor/wit/floor.wit`): not a plugin kind, but loaded through the same
//! sandbox so its cost includes exactly what a plugin call's does (store, epoch deadline).

use wasmtime::component::InstancePre;
use wasmtime::Store;

use crate::bindings::{floor as b, wit};
use crate::host_state::HostState;
use crate::sandbox::Kind;

/// Marker for the floor world.
pub struct FloorKind;

impl Kind for FloorKind {
    type Pre = b::FloorPre<HostState>;
    type Bindings = b::Floor;

    fn pre(pre: InstancePre<HostState>, _component: &[u8]) -> wasmtime::Result<Self::Pre> {
        b::FloorPre::new(pre)
    }

    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)> {
        let instance = pre.instance_pre().instantiate(&mut *store)?;
        let bindings = b::Floor::new(&mut *store, &instance)?;
        Ok((bindings, instance))
    }

    fn init(
        _bindings: &Self::Bindings,
        _store: &mut Store<HostState>,
        _config: &Vec<(String, wit::ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(Ok(()))
    }
}
