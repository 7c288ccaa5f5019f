//! Whether a component's export has a post-return function, read from its bytes.
//!
//! Why: wasmtime 48 calls an export's post-return inside the call, right after lifting
//! the answer. An answer lifted as a copy (`Vec<u8>`) is safe whatever the post-return
//! does; an answer lifted as a view into the component's memory (`WasmList`), which the
//! kernel reads after the call, is safe only when no post-return ran in between, because
//! a post-return may free it (and an allocator writes its own records into freed
//! memory) or reuse it. The Rust SDK's packed exports declare none and keep their answer
//! until the next call (`docs/authoring.md`, "The packed form"); a generated export in
//! any language has one. wasmtime does not say which an export has, so the kernel reads
//! the component's own declaration: the `post-return` option of the `canon lift` the
//! export names.

use wasmparser::{
    CanonicalFunction, CanonicalOption, ComponentAlias, ComponentExternalKind, ComponentTypeRef,
    Parser, Payload,
};

/// Where a function of the top-level component came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Origin {
    /// Lifted here, with or without a post-return.
    Lifted { post_return: bool },
    /// Imported, or an export of an instance inside: what it does is not known here.
    Elsewhere,
}

/// For each name of `exports`, true only when `component` exports a function of that name
/// lifted by its own `canon lift` without a `post-return` option. False when the export
/// is missing, comes from an instance inside the component (where reading on would mean
/// following nested components), or the bytes do not parse: every doubt answers "it may
/// have one". One pass over the bytes, whatever the number of names.
pub fn lifted_without_post_return<const N: usize>(
    component: &[u8],
    exports: [&str; N],
) -> [bool; N] {
    let origins = origins_of(component, exports).unwrap_or([None; N]);
    origins.map(|o| o == Some(Origin::Lifted { post_return: false }))
}

fn origins_of<const N: usize>(component: &[u8], names: [&str; N]) -> Option<[Option<Origin>; N]> {
    // The component's function index space, in order; sections of nested modules and
    // components come inline between their header and their `End`, and are skipped.
    let mut funcs: Vec<Origin> = Vec::new();
    let mut found = [None; N];
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload.ok()? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => break,
            },
            _ if depth > 0 => {}
            Payload::ComponentImportSection(imports) => {
                for import in imports {
                    if let ComponentTypeRef::Func(_) = import.ok()?.ty {
                        funcs.push(Origin::Elsewhere);
                    }
                }
            }
            Payload::ComponentAliasSection(aliases) => {
                for alias in aliases {
                    if let ComponentAlias::InstanceExport {
                        kind: ComponentExternalKind::Func,
                        ..
                    } = alias.ok()?
                    {
                        funcs.push(Origin::Elsewhere);
                    }
                }
            }
            Payload::ComponentCanonicalSection(canonicals) => {
                for canonical in canonicals {
                    if let CanonicalFunction::Lift { options, .. } = canonical.ok()? {
                        let post_return = options
                            .iter()
                            .any(|o| matches!(o, CanonicalOption::PostReturn(_)));
                        funcs.push(Origin::Lifted { post_return });
                    }
                }
            }
            Payload::ComponentExportSection(exports) => {
                for e in exports {
                    let e = e.ok()?;
                    if e.kind != ComponentExternalKind::Func {
                        continue;
                    }
                    // An export is a new index of the function it names.
                    let origin = *funcs.get(e.index as usize)?;
                    funcs.push(origin);
                    if let Some(at) = names.iter().position(|&n| n == e.name.name) {
                        found[at] = Some(origin);
                    }
                }
            }
            _ => {}
        }
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{
        CanonicalFunctionSection, CanonicalOption as Opt, Component, ComponentExportKind,
        ComponentExportSection, ComponentImportSection, ComponentTypeRef as TypeRef,
        ComponentTypeSection, PrimitiveValType,
    };

    /// A component (not valid, only well formed: nothing here validates) with a func type,
    /// one imported func, then one lifted func per entry of `post_returns`, each exported
    /// as `f<i>`, and the import exported as `imported`.
    fn component(post_returns: &[bool]) -> Vec<u8> {
        let mut types = ComponentTypeSection::new();
        types
            .function()
            .params([("x", PrimitiveValType::U32)])
            .result(Some(PrimitiveValType::U32.into()));
        let mut imports = ComponentImportSection::new();
        imports.import("host-f", TypeRef::Func(0));
        let mut canon = CanonicalFunctionSection::new();
        for &post in post_returns {
            let options = if post {
                vec![Opt::PostReturn(1)]
            } else {
                vec![]
            };
            canon.lift(0, 0, options);
        }
        let mut exports = ComponentExportSection::new();
        exports.export("imported", ComponentExportKind::Func, 0, None);
        for i in 0..post_returns.len() {
            exports.export(
                format!("f{i}"),
                ComponentExportKind::Func,
                1 + i as u32,
                None,
            );
        }
        let mut c = Component::new();
        c.section(&types)
            .section(&imports)
            .section(&canon)
            .section(&exports);
        c.finish()
    }

    /// [`lifted_without_post_return`] for one name.
    fn kept(component: &[u8], export: &str) -> bool {
        lifted_without_post_return(component, [export])[0]
    }

    #[test]
    fn a_lift_is_read_with_or_without_its_post_return() {
        let bytes = component(&[false, true, false]);
        assert!(kept(&bytes, "f0"));
        assert!(!kept(&bytes, "f1"));
        assert!(kept(&bytes, "f2"));
    }

    #[test]
    fn the_shipped_serializers_keep_their_packed_answers_and_only_those() {
        for name in ["json", "msgpack"] {
            let bytes = axle_builtins::component(name).expect("a shipped serializer");
            assert!(kept(bytes, "encode-packed"), "{name}");
            assert!(kept(bytes, "decode-packed"), "{name}");
            // Generated exports that answer a list or a text have their post-return.
            assert!(!kept(bytes, "decode"), "{name}");
            assert!(!kept(bytes, "content-type"), "{name}");
            // Several names, one pass: each answered in its place.
            assert_eq!(
                lifted_without_post_return(bytes, ["decode", "decode-packed"]),
                [false, true],
                "{name}"
            );
        }
    }

    #[test]
    fn every_doubt_answers_that_it_may_have_one() {
        let bytes = component(&[false]);
        assert!(!kept(&bytes, "imported"), "an import");
        assert!(!kept(&bytes, "missing"), "no such export");
        assert!(!kept(&bytes[..bytes.len() - 3], "f0"), "cut short");
        assert!(!kept(b"not wasm", "f0"), "not wasm");
    }
}
