//! `build-plugin --lang L DIR -o OUT.wasm`: one plugin directory anywhere (such as a
//! template from `axle plugins new`) into one component, with the same recipes as the
//! examples.
//!
//! The world comes from `DIR/plugin.toml`: a `world = "..."` key (the examples' form), or
//! the `kind` of its one `[plugins.<name>]` entry (the manifest snippet `axle plugins new`
//! writes). The directory's sources are first copied into a staging directory under
//! `<target>/plugin-builds/`, leaving out `.wasm` files, `target/` and `node_modules/`: a
//! component built into the plugin's own directory must not become an input of the next
//! build (componentize-py would bundle it, and the input stamps would never match).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::toolchain::{self, InputsKey};
use crate::{c, js, python, Example};

/// The languages `build-plugin` knows (Rust builds with plain `cargo build`).
pub const LANGS: &str = "c, python, js (QuickJS), js-starlingmonkey";

/// Parses `--lang L DIR -o OUT` (in any order) and builds.
pub fn run(args: &[String]) -> Result<()> {
    let (mut lang, mut dir, mut out) = (None, None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--lang" => lang = it.next().cloned(),
            "-o" | "--out" => out = it.next().map(PathBuf::from),
            a if a.starts_with('-') => bail!("unknown option `{a}`"),
            a if dir.is_none() => dir = Some(PathBuf::from(a)),
            a => bail!("unexpected argument `{a}`"),
        }
    }
    let (Some(lang), Some(dir), Some(out)) = (lang, dir, out) else {
        bail!("usage: build-plugin --lang LANG DIR -o OUT.wasm (LANG: {LANGS})");
    };
    build(&lang, &dir, &out)
}

fn build(lang: &str, dir: &Path, out: &Path) -> Result<()> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("plugin directory {}", dir.display()))?;
    let name = plugin_name(&dir)?;
    let world = world_of(&dir.join("plugin.toml"))?;
    let root = crate::workspace_root();

    // One staging area per plugin directory, so two plugins of the same name do not share
    // stamps.
    let mut id = InputsKey::new("build-plugin");
    id.text(&dir.to_string_lossy());
    let out_dir = crate::target_dir(&root)
        .join("plugin-builds")
        .join(lang)
        .join(&id.finish()[..16]);
    let staged = out_dir.join("src").join(&name);
    let _ = fs::remove_dir_all(&staged);
    fs::create_dir_all(&staged).with_context(|| format!("creating {}", staged.display()))?;
    copy_sources(&dir, &staged)?;

    let ex = Example {
        wit: crate::wit_dir(&root, &dir),
        dir: staged,
        work: out_dir.join("build").join(&name),
        out_dir: out_dir.clone(),
        name,
        world,
    };
    fs::create_dir_all(&ex.work).with_context(|| format!("creating {}", ex.work.display()))?;
    let target = crate::target_dir(&root);
    let built = match lang {
        "c" => {
            c::check_clang()?;
            c::build(&ex)?
        }
        "python" => python::build(&ex, &toolchain::componentize_py(&target)?)?,
        "js" | "js-quickjs" => js::quickjs(&ex, &toolchain::js_bin(&target)?)?,
        "js-starlingmonkey" | "js-sm" => js::starlingmonkey(&ex, &toolchain::js_bin(&target)?)?,
        other => bail!("unknown language `{other}` (languages: {LANGS})"),
    };
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(&built, out).with_context(|| format!("writing {}", out.display()))?;
    let size = fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!("built {} ({size} bytes)", out.display());
    Ok(())
}

/// The directory's name as a file stem: what the build calls its intermediate files.
fn plugin_name(dir: &Path) -> Result<String> {
    let name = dir
        .file_name()
        .and_then(OsStr::to_str)
        .context("the plugin directory name is not UTF-8")?;
    Ok(name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect())
}

/// The world a plugin directory implements, from its `plugin.toml`.
pub fn world_of(path: &Path) -> Result<String> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("parsing {}", path.display()))?;
    if let Some(toml::Value::String(w)) = table.get("world") {
        return Ok(w.clone());
    }
    let kinds: Vec<&str> = match table.get("plugins") {
        Some(toml::Value::Table(plugins)) => plugins
            .values()
            .filter_map(|p| p.get("kind").and_then(toml::Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
    match kinds[..] {
        [kind] => Ok(kind.to_string()),
        _ => bail!(
            "{}: needs `world = \"<name>\"` or exactly one `[plugins.<name>]` entry with a `kind`",
            path.display()
        ),
    }
}

/// Copies the plugin's sources: everything but hidden entries, `.wasm` files, `target/`,
/// `node_modules/` and `__pycache__/`.
fn copy_sources(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default();
        let text = name.to_string_lossy();
        let skipped = text.starts_with('.')
            || ["target", "node_modules", "__pycache__"].contains(&text.as_ref())
            || path.extension() == Some(OsStr::new("wasm"));
        if skipped {
            continue;
        }
        let dest = to.join(name);
        if path.is_dir() {
            fs::create_dir_all(&dest)?;
            copy_sources(&path, &dest)?;
        } else {
            fs::copy(&path, &dest).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}
