//! The requests a `leasing-limiter` admitted ahead: each thread holds at most one lease,
//! for one key of one limiter, until it is used up or [`axle_spi::LEASE_NS`] after the
//! plugin gave it. Per thread, so a leased admission writes nothing another core reads.
//! Also where a component's `acquire-lease` is found, once per load.

use std::cell::Cell;

/// One lease: whose, for which key, how many requests are left and until when.
#[derive(Clone, Copy)]
struct Lease {
    /// The limiter's serial (`SERIALS`; 0 is never one, so the empty lease matches none).
    serial: u64,
    key: u32,
    left: u32,
    until_ns: u64,
}

const NONE: Lease = Lease {
    serial: 0,
    key: 0,
    left: 0,
    until_ns: 0,
};

thread_local! {
    static LEASE: Cell<Lease> = const { Cell::new(NONE) };
}

/// Admits one request under `key` of limiter `serial` from this thread's lease, if it
/// holds one for them with a request left at `at_ns`.
pub(super) fn take(serial: u64, key: u32, at_ns: u64) -> bool {
    LEASE.with(|cell| {
        let mut lease = cell.get();
        if lease.serial != serial || lease.key != key || lease.left == 0 || at_ns >= lease.until_ns
        {
            return false;
        }
        lease.left -= 1;
        cell.set(lease);
        true
    })
}

/// Holds `left` more requests under `key` of limiter `serial`, given at `now_ns`, in place
/// of whatever this thread held (a lease replaced is dropped, as the contract allows).
pub(super) fn hold(serial: u64, key: u32, left: u32, now_ns: u64) {
    LEASE.set(Lease {
        serial,
        key,
        left,
        until_ns: now_ns.saturating_add(axle_spi::LEASE_NS),
    });
}

/// Where a component's `acquire-lease` is, if it exports one of the contract's type
/// (`func(u32, u64) -> u64`). One of another type is not called: the limiter is asked as a
/// plain one, once per request, and the log says why.
pub(super) fn export(
    plugin: &str,
    component: &wasmtime::component::Component,
) -> Option<wasmtime::component::ComponentExportIndex> {
    use wasmtime::component::{types::ComponentItem, Type};
    let (item, index) = component.get_export(None, "acquire-lease")?;
    let typed = match &item {
        ComponentItem::ComponentFunc(f) => {
            f.params().map(|(_, t)| t).eq([Type::U32, Type::U64]) && f.results().eq([Type::U64])
        }
        _ => false,
    };
    if !typed {
        tracing::warn!(
            plugin,
            "the limiter's `acquire-lease` is not `func(key: u32, now-ns: u64) -> u64`: \
             not called, every request asks `acquire`"
        );
        return None;
    }
    Some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_serves_its_limiter_and_key_until_used_or_expired() {
        hold(7, 3, 2, 1_000);
        assert!(!take(8, 3, 1_000), "another limiter");
        assert!(!take(7, 4, 1_000), "another key");
        assert!(take(7, 3, 1_000));
        assert!(take(7, 3, 1_000 + axle_spi::LEASE_NS - 1));
        assert!(!take(7, 3, 1_000), "used up");
        hold(7, 3, 5, 1_000);
        assert!(!take(7, 3, 1_000 + axle_spi::LEASE_NS), "expired");
        // Another thread holds nothing of this one's.
        hold(7, 3, 5, 1_000);
        std::thread::spawn(|| assert!(!take(7, 3, 1_000)))
            .join()
            .unwrap();
        assert!(take(7, 3, 1_000));
    }

    /// A component exporting one function `name` of the component type `params` →
    /// `result`, lifted from a core function returning 0 (never called here).
    fn exporting(
        name: &str,
        params: &[(&str, wasm_encoder::PrimitiveValType)],
        result: wasm_encoder::PrimitiveValType,
    ) -> Vec<u8> {
        use wasm_encoder::{
            CodeSection, ComponentBuilder, ComponentExportKind, ComponentValType, ExportKind,
            ExportSection, Function, FunctionSection, Instruction, Module, PrimitiveValType,
            TypeSection, ValType,
        };
        let core = |t: PrimitiveValType| match t {
            PrimitiveValType::U64 | PrimitiveValType::S64 => ValType::I64,
            _ => ValType::I32,
        };
        let mut module = Module::new();
        let mut types = TypeSection::new();
        let core_params: Vec<ValType> = params.iter().map(|(_, t)| core(*t)).collect();
        types.ty().function(core_params, [core(result)]);
        let mut funcs = FunctionSection::new();
        funcs.function(0);
        let mut exports = ExportSection::new();
        exports.export("f", ExportKind::Func, 0);
        let mut body = Function::new([]);
        body.instruction(&match core(result) {
            ValType::I64 => Instruction::I64Const(0),
            _ => Instruction::I32Const(0),
        });
        body.instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&body);
        module
            .section(&types)
            .section(&funcs)
            .section(&exports)
            .section(&code);

        let mut component = ComponentBuilder::default();
        let module = component.core_module(None, &module);
        let instance = component.core_instantiate(None, module, []);
        let core_func = component.core_alias_export(None, instance, "f", ExportKind::Func);
        let (ty, mut func_type) = component.type_function(None);
        func_type
            .params(
                params
                    .iter()
                    .map(|(n, t)| (*n, ComponentValType::Primitive(*t))),
            )
            .result(Some(ComponentValType::Primitive(result)));
        let func = component.lift_func(None, core_func, ty, []);
        component.export(name, ComponentExportKind::Func, func, None);
        component.finish()
    }

    /// The export is used only with the contract's type: one of another type, or none,
    /// leaves the limiter asked through `acquire` on every request.
    #[test]
    fn only_an_acquire_lease_of_the_contracts_type_is_used() {
        use wasm_encoder::PrimitiveValType::{U32, U64};
        let engine = wasmtime::Engine::default();
        let load = |bytes: Vec<u8>| {
            wasmtime::component::Component::from_binary(&engine, &bytes).expect("a component")
        };
        let right = load(exporting(
            "acquire-lease",
            &[("key", U32), ("now-ns", U64)],
            U64,
        ));
        assert!(export("right", &right).is_some());
        let narrow = load(exporting("acquire-lease", &[("key", U32)], U32));
        assert!(export("narrow", &narrow).is_none());
        let swapped = load(exporting(
            "acquire-lease",
            &[("now-ns", U64), ("key", U32)],
            U64,
        ));
        assert!(export("swapped", &swapped).is_none());
        let absent = load(exporting("acquire", &[("key", U32), ("now-ns", U64)], U64));
        assert!(export("absent", &absent).is_none());
    }
}
