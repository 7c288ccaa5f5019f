//! Working around a name clash in the dynamic-linking toolchains (componentize-py,
//! componentize-qjs), and checking what a built component exports and imports.
//!
//! Both toolchains link the guest's runtime (CPython or QuickJS, with wasi-libc) as shared
//! libraries next to a generated bindings library, and a world-level export becomes a core
//! symbol of the same name. When the runtime already exports a function of that name with
//! another signature, the linker (`wit_component::Linker`) panics with "one or more
//! duplicate items detected when collecting into set or map": libc's `select` clashes with
//! the selector's `select` (componentize-py 0.19-0.25), and QuickJS's `init` with `init`
//! (componentize-qjs 0.4.5). StarlingMonkey and Rust/C guests are not affected.
//!
//! So those exports are built under another name, `axle-<name>`, from a copy of the WIT in
//! which only that world's exports are renamed; the author's module is wrapped so the
//! plugin's own code keeps the WIT's names; and the finished component's top-level export
//! is renamed back. The export's type does not depend on its name, so the result is exactly
//! the component the real world describes, which [`check_exports`] verifies.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use wasmparser::{Parser, Payload, Validator, WasmFeatures};
use wit_component::WitPrinter;
use wit_parser::{Resolve, WorldItem, WorldKey};

/// The prefix a clashing export is built under.
pub const RENAME_PREFIX: &str = "axle-";

/// The WIT package of `wit_dir` as one WIT text, with the world-level function exports
/// `renamed` of world `world` renamed to `axle-<name>` (names the world does not export
/// are ignored). Returns the text and the renames that applied, as (built, real) pairs.
pub fn wit_with_renamed_exports(
    wit_dir: &Path,
    world: &str,
    renamed: &[&str],
) -> Result<(String, Vec<(String, String)>)> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve.push_dir(wit_dir).context("parsing WIT")?;
    let world_id = resolve
        .select_world(&[pkg], Some(world))
        .with_context(|| format!("world `{world}`"))?;
    let mut applied = Vec::new();
    let w = &mut resolve.worlds[world_id];
    let exports = std::mem::take(&mut w.exports);
    for (key, mut item) in exports {
        let key = match (key, &mut item) {
            (WorldKey::Name(name), WorldItem::Function(f)) if renamed.contains(&name.as_str()) => {
                let built = format!("{RENAME_PREFIX}{name}");
                f.name = built.clone();
                applied.push((built.clone(), name));
                WorldKey::Name(built)
            }
            (key, _) => key,
        };
        w.exports.insert(key, item);
    }
    let mut printer = WitPrinter::default();
    printer
        .print(&resolve, pkg, &[])
        .context("printing the renamed WIT")?;
    Ok((printer.output.to_string(), applied))
}

/// Renames top-level exports of `component` (pairs of (from, to)), leaving every other
/// byte as it was, and validates the result.
pub fn rename_exports(component: &[u8], renames: &[(String, String)]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(component.len());
    let mut depth = 0u32;
    let mut renamed = 0;
    for payload in Parser::new(0).parse_all(component) {
        let payload = payload?;
        if depth > 0 {
            // Inside a nested module or component: copied whole with its section.
            match payload {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) => depth -= 1,
                _ => {}
            }
            continue;
        }
        match &payload {
            Payload::Version { range, .. } => {
                out.extend_from_slice(slice(component, range.start, range.end));
            }
            Payload::ComponentExportSection(reader) => {
                let range = reader.range();
                let mut body = Vec::new();
                leb_u32(&mut body, reader.count());
                let items: Vec<(u64, _)> = reader
                    .clone()
                    .into_iter_with_offsets()
                    .collect::<Result<_, _>>()?;
                for (i, (start, export)) in items.iter().enumerate() {
                    let end = items.get(i + 1).map_or(range.end, |(next, _)| *next);
                    let item = slice(component, *start, end);
                    match renames.iter().find(|(from, _)| export.name.name == from) {
                        Some((_, to)) => {
                            body.extend_from_slice(&renamed_item(item, export.name.name, to)?);
                            renamed += 1;
                        }
                        None => body.extend_from_slice(item),
                    }
                }
                section(&mut out, 11, &body);
            }
            Payload::End(_) => {}
            other => {
                let (id, range) = other
                    .as_section()
                    .context("unexpected payload at the top level of a component")?;
                section(&mut out, id, slice(component, range.start, range.end));
                if matches!(
                    other,
                    Payload::ModuleSection { .. } | Payload::ComponentSection { .. }
                ) {
                    depth += 1;
                }
            }
        }
    }
    ensure!(
        renamed == renames.len(),
        "renamed {renamed} of {} exports",
        renames.len()
    );
    Validator::new_with_features(WasmFeatures::all())
        .validate_all(&out)
        .context("the renamed component does not validate")?;
    Ok(out)
}

/// One export entry with its plain name `from` replaced by `to`.
fn renamed_item(item: &[u8], from: &str, to: &str) -> Result<Vec<u8>> {
    // A plain extern name: 0x00 (or the legacy 0x01), LEB128 length, UTF-8 bytes; then
    // the kind, index and optional type, copied as they are.
    ensure!(
        matches!(item.first(), Some(0x00 | 0x01)),
        "export `{from}` has a name with options; not renamed"
    );
    let mut rest = &item[1..];
    let len = read_leb_u32(&mut rest)? as usize;
    ensure!(
        rest.get(..len) == Some(from.as_bytes()),
        "export entry does not start with `{from}`"
    );
    let mut out = vec![0x00];
    leb_u32(&mut out, to.len() as u32);
    out.extend_from_slice(to.as_bytes());
    out.extend_from_slice(&rest[len..]);
    Ok(out)
}

/// `bytes[start..end]`, with wasmparser's `u64` offsets.
fn slice(bytes: &[u8], start: u64, end: u64) -> &[u8] {
    &bytes[start as usize..end as usize]
}

fn section(out: &mut Vec<u8>, id: u8, body: &[u8]) {
    out.push(id);
    leb_u32(out, body.len() as u32);
    out.extend_from_slice(body);
}

fn leb_u32(out: &mut Vec<u8>, mut v: u32) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb_u32(bytes: &mut &[u8]) -> Result<u32> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = bytes.split_first().context("truncated LEB128")?;
        *bytes = rest;
        v |= u32::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    bail!("LEB128 too long")
}

/// The top-level import and export names of a component.
pub fn interface_names(component: &[u8]) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let mut imports = BTreeSet::new();
    let mut exports = BTreeSet::new();
    let mut depth = 0u32;
    for payload in Parser::new(0).parse_all(component) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(r) if depth == 0 => {
                for i in r {
                    imports.insert(i?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(r) if depth == 0 => {
                for e in r {
                    exports.insert(e?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// Fails unless `component` exports every function of world `world` under its WIT name;
/// returns the interfaces it imports (`wasi:...`, `axle:spi/host`), for the build log.
pub fn check_exports(component: &[u8], wit_dir: &Path, world: &str) -> Result<Vec<String>> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve.push_dir(wit_dir).context("parsing WIT")?;
    let world_id = resolve.select_world(&[pkg], Some(world))?;
    let (imports, exports) = interface_names(component)?;
    for key in resolve.worlds[world_id].exports.keys() {
        let name = resolve.name_world_key(key);
        ensure!(
            exports.contains(&name),
            "the component does not export `{name}` (it exports {exports:?})"
        );
    }
    Ok(imports.into_iter().filter(|i| i.contains(':')).collect())
}
