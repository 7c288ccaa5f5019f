//! C plugins: `wit-bindgen c`, Debian's clang for `wasm32-wasi`, `wit-component`, through
//! the library crates (no CLI to `cargo install`).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use wit_bindgen_core::Files;
use wit_component::ComponentEncoder;
use wit_parser::{Resolve, WorldId};

use crate::Example;

/// Debian packages that provide clang, the wasm linker, wasi-libc and the wasm32 builtins.
pub const DEBIAN_PACKAGES: &str = "clang lld wasi-libc libclang-rt-14-dev-wasm32";

/// Builds every `plugins/examples/c/*/` directory.
pub fn plugins() -> Result<()> {
    check_clang()?;
    crate::build_examples("c", &mut |ex| Ok(vec![build(ex)?]))
}

/// Fails early, with the package list, when clang is not installed at all.
pub fn check_clang() -> Result<()> {
    match Command::new("clang").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => bail!("`clang` not found; on Debian: apt-get install -y {DEBIAN_PACKAGES}"),
    }
}

/// Bindings, compile, componentize: one plugin directory into one component file.
pub fn build(ex: &Example) -> Result<PathBuf> {
    let gen = ex.work.join("gen");
    // Start from an empty gen dir so bindings of a world the plugin no longer uses
    // cannot be picked up by the `*.c` glob below.
    let _ = fs::remove_dir_all(&gen);
    fs::create_dir_all(&gen).with_context(|| format!("creating {}", gen.display()))?;

    let mut resolve = Resolve::default();
    let (pkg, _) = resolve.push_dir(&ex.wit).context("step `parse WIT`")?;
    let world = resolve
        .select_world(&[pkg], Some(&ex.world))
        .with_context(|| format!("step `parse WIT`: world `{}`", ex.world))?;
    generate_bindings(&mut resolve, world, &gen).context("step `wit-bindgen c`")?;

    let core = ex.work.join("core.wasm");
    compile(&ex.dir, &gen, &core).context("step `clang`")?;

    let component = componentize(&core).context("step `component new`")?;
    let out = ex.out_dir.join(format!("{}.wasm", ex.name));
    fs::write(&out, component).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// Writes the C bindings (`<world>.h`, `<world>.c`) and `<world>_component_type.o`, the
/// object whose custom section tells `ComponentEncoder` which world the module targets.
fn generate_bindings(resolve: &mut Resolve, world: WorldId, gen: &Path) -> Result<()> {
    let mut files = Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(resolve, world, &mut files)?;
    for (file, contents) in files.iter() {
        let path = gen.join(file);
        fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Compiles the plugin's `.c` files with the generated bindings into a core module.
///
/// `-mexec-model=reactor`: a library with exports and no `main`, initialised once by
/// `_initialize` (which the component encoder wires up).
fn compile(dir: &Path, gen: &Path, core: &Path) -> Result<()> {
    let mut inputs = c_files(dir)?;
    if inputs.is_empty() {
        bail!("no .c files in {}", dir.display());
    }
    inputs.extend(c_files(gen)?);
    for entry in fs::read_dir(gen)? {
        let path = entry?.path();
        if path.extension() == Some(OsStr::new("o")) {
            inputs.push(path);
        }
    }

    let mut cmd = Command::new("clang");
    cmd.args(["--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-s"])
        .args(["-Wall", "-Wextra", "-Wno-unused-parameter"])
        .arg("-I")
        .arg(gen)
        .arg("-o")
        .arg(core)
        .args(&inputs);
    let out = cmd.output().context("running clang")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Missing wasi-libc headers, `wasm-ld` or the wasm32 builtins library all show up
        // as a file clang cannot find; say which packages bring them.
        let missing_file = [
            "file not found",
            "doesn't exist",
            "cannot open",
            "unable to find",
        ]
        .iter()
        .any(|m| stderr.contains(m));
        let hint = if missing_file {
            format!("\n(a toolchain file may be missing; on Debian: apt-get install -y {DEBIAN_PACKAGES})")
        } else {
            String::new()
        };
        bail!(
            "clang failed ({}):\n{}{hint}",
            out.status,
            stderr.trim_end()
        );
    }
    // Warnings are worth seeing even when the build succeeds.
    if !stderr.trim().is_empty() {
        eprintln!("{}", stderr.trim_end());
    }
    Ok(())
}

/// The `.c` files directly inside `dir`, sorted so builds are reproducible.
fn c_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension() == Some(OsStr::new("c")) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Wraps a core module into a component, adding the WASI preview1 reactor adapter only if
/// the module imports preview1 (a plugin that uses nothing but malloc needs none, and then
/// the component imports nothing beyond the world's own `host` interface).
fn componentize(core: &Path) -> Result<Vec<u8>> {
    use wasi_preview1_component_adapter_provider::{
        WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME as PREVIEW1, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
    };

    let module = fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let mut encoder = ComponentEncoder::default();
    encoder.module(&module)?.validate(true);
    if imports_module(&module, PREVIEW1)? {
        encoder.adapter(PREVIEW1, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)?;
    }
    encoder.encode()
}

/// Whether the core module imports anything from module `name`.
fn imports_module(module: &[u8], name: &str) -> Result<bool> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let wasmparser::Payload::ImportSection(imports) = payload? {
            for import in imports.into_imports() {
                if import?.module == name {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}
