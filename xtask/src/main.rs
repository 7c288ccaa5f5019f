//! Build tasks for Axle that `cargo build` cannot express: the example plugins written in
//! other languages (`plugins/examples/<lang>/<name>/`), each into
//! `<target>/<lang>-plugins/<name>.wasm`, a WebAssembly component for the world named in
//! that directory's `plugin.toml`.
//!
//! - `c-plugins`: what `docs/authoring.md`'s C recipe does by hand (`wit-bindgen c`, `clang`,
//!   `wasm-tools component new`), through the library crates, so nobody has to
//!   `cargo install` the two CLIs (7-12 minutes each).
//! - `python-plugins`: componentize-py, installed into a venv under
//!   `<target>/toolchains/py` on first use.
//! - `js-plugins`: componentize-qjs (QuickJS, `<name>.wasm`) and componentize-js
//!   (StarlingMonkey, `<name>-sm.wasm`), installed with `npm ci` under
//!   `<target>/toolchains/js` on first use.
//! - `examples`: all of the above.
//! - `build-plugin --lang L DIR -o OUT.wasm`: one plugin directory anywhere (a template
//!   from `axle plugins new`), with the recipe of language `L` (`c`, `python`, `js` for
//!   QuickJS, `js-starlingmonkey`).
//! - `inspect FILE`: the top-level imports and exports of a component.
//! - `check-layout`: the CI guard on the workspace layout (`layout.rs`): crate layers,
//!   dependency cycles, what library crates may depend on, file sizes.
//!
//! Python and JS builds take seconds to tens of seconds, so they are skipped when nothing
//! that goes into them (sources, WIT, toolchain versions) changed since the last build.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

mod c;
mod component;
mod js;
mod layout;
mod python;
mod single;
mod toolchain;

const USAGE: &str = "usage: cargo run --release -p xtask -- \
    c-plugins | python-plugins | js-plugins | examples | inspect FILE | \
    build-plugin --lang LANG DIR -o OUT.wasm | check-layout";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["c-plugins"] => c::plugins(),
        ["python-plugins"] => python::plugins(),
        ["js-plugins"] => js::plugins(),
        ["examples"] => c::plugins()
            .and_then(|()| python::plugins())
            .and_then(|()| js::plugins()),
        ["inspect", file] => inspect(Path::new(file)),
        ["build-plugin", ..] => single::run(&args[1..]),
        ["check-layout"] => check_layout(),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole context chain on one line: plugin, step, cause.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the top-level imports and exports of a component.
fn inspect(file: &Path) -> Result<()> {
    let bytes = fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let (imports, exports) = component::interface_names(&bytes)?;
    for name in imports {
        println!("import {name}");
    }
    for name in exports {
        println!("export {name}");
    }
    Ok(())
}

/// Reads `cargo metadata` and the line counts of the `.rs` files, prints every violation
/// of the layout rules (`layout.rs`) and fails if there is one.
fn check_layout() -> Result<()> {
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let meta = layout::Metadata::parse(&String::from_utf8_lossy(&out.stdout))?;

    let mut files = Vec::new();
    for dir in layout::SIZE_ROOTS {
        rs_files(
            &meta.workspace_root,
            &meta.workspace_root.join(dir),
            &mut files,
        )?;
    }
    let violations = layout::violations(&meta, &files);
    if !violations.is_empty() {
        for v in &violations {
            eprintln!("{v}");
        }
        bail!("check-layout: {} violation(s)", violations.len());
    }
    let checked = files
        .iter()
        .filter(|(f, _)| layout::size_checked(f))
        .count();
    println!(
        "check-layout: ok ({} crate(s) under crates/ layered, no cycles, {checked} .rs file(s) \
         within {} lines)",
        layout::crate_count(&meta),
        layout::LINE_LIMIT
    );
    Ok(())
}

/// Appends the `.rs` files under `dir` (skipping `target/` directories) to `out`, as
/// (path relative to `root`, line count). A missing `dir` has none.
fn rs_files(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, usize)>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !matches!(entry.file_name().to_str(), Some("target" | "node_modules")) {
                rs_files(root, &path, out)?;
            }
        } else if kind.is_file() && path.extension() == Some(OsStr::new("rs")) {
            let text = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let lines = String::from_utf8_lossy(&text).lines().count();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            out.push((rel, lines));
        }
    }
    Ok(())
}

/// The workspace root: this crate lives in `<root>/xtask`.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// The WIT package a plugin is built against: its own `wit/` when it carries one (a
/// plugin from `axle plugins new` holds the package it was written for, so it builds
/// outside this repository with any WIT toolchain), else the SDK's, `sdk/wit/`.
pub fn wit_dir(root: &Path, plugin: &Path) -> PathBuf {
    let own = plugin.join("wit");
    if own.join("kinds.wit").is_file() {
        own
    } else {
        root.join("sdk/wit")
    }
}

/// Where cargo puts its output: `$CARGO_TARGET_DIR` if set, else `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => root.join("target"),
    }
}

/// One example plugin directory, and where its build goes.
pub struct Example {
    /// The WIT package the plugin is built against ([`wit_dir`]).
    pub wit: PathBuf,
    /// `plugins/examples/<lang>/<name>/`.
    pub dir: PathBuf,
    /// The directory name: the output is `<name>.wasm`.
    pub name: String,
    /// The world of package `axle:spi` the plugin implements (`plugin.toml`'s `world`).
    pub world: String,
    /// `<target>/<lang>-plugins/`.
    pub out_dir: PathBuf,
    /// `<target>/<lang>-plugins/build/<name>/`: generated files, stamps.
    pub work: PathBuf,
}

/// Builds every `plugins/examples/<lang>/*/` directory with `build` (which returns the
/// files it wrote), then reports all failures at once.
fn build_examples(
    lang: &str,
    build: &mut dyn FnMut(&Example) -> Result<Vec<PathBuf>>,
) -> Result<()> {
    let root = workspace_root();
    let examples = root.join("plugins/examples").join(lang);
    let out_dir = target_dir(&root).join(format!("{lang}-plugins"));

    let mut dirs: Vec<PathBuf> = fs::read_dir(&examples)
        .with_context(|| format!("reading {}", examples.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    dirs.retain(|d| d.is_dir());
    dirs.sort();

    let mut failed = 0;
    for dir in &dirs {
        let built = example(&root, dir, &out_dir).and_then(|ex| {
            fs::create_dir_all(&ex.work)
                .with_context(|| format!("creating {}", ex.work.display()))?;
            build(&ex)
        });
        match built {
            Ok(outs) => {
                for out in outs {
                    let size = fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
                    println!("built {} ({size} bytes)", out.display());
                }
            }
            Err(e) => {
                eprintln!("error: plugin {}: {e:#}", dir.display());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} {lang} plugin(s) failed to build",
            dirs.len()
        );
    }
    Ok(())
}

fn example(root: &Path, dir: &Path, out_dir: &Path) -> Result<Example> {
    let name = dir
        .file_name()
        .and_then(OsStr::to_str)
        .context("directory name is not UTF-8")?
        .to_string();
    let path = dir.join("plugin.toml");
    let world = single::world_of(&path)?;
    Ok(Example {
        wit: wit_dir(root, dir),
        dir: dir.to_path_buf(),
        work: out_dir.join("build").join(&name),
        out_dir: out_dir.to_path_buf(),
        name,
        world,
    })
}
