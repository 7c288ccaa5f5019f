//! JavaScript plugins, with both engines: QuickJS (componentize-qjs, `<name>.wasm`) and
//! StarlingMonkey (componentize-js, `<name>-sm.wasm`), installed by `npm ci` on first use.
//!
//! A plugin directory holds `app.js`, an ES module whose exported functions are the
//! world's exports in camelCase. What runs, with `<build>` =
//! `<target>/js-plugins/build/<name>` and `<bin>` = `<target>/toolchains/js/node_modules/.bin`:
//!
//! ```text
//! <bin>/componentize-qjs --wit <build>/wit-qjs --world <world> --js <build>/qjs/entry.js \
//!     --module-root <build>/qjs --sync -o <build>/raw-qjs.wasm
//! <bin>/componentize-js <dir>/app.js --wit wit -n <world> \
//!     -d random clocks http fetch-event -o <target>/js-plugins/<name>-sm.wasm
//! ```
//!
//! QuickJS: `--sync` builds the non-async runtime (the host calls exports synchronously);
//! `<build>/qjs` is a copy of the plugin directory plus `entry.js`, which re-exports
//! `app.js` under the names the build uses (see `component.rs`). StarlingMonkey: `-d`
//! leaves out `wasi:http` and the other WASI interfaces the host does not grant, but keeps
//! `stdio`, so `console.log` reaches the kernel's log (`docs/sandbox.md`); what remains is
//! linked by the host with nothing granted. (The QuickJS runtime has no `console`.)

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::component;
use crate::python::copy_dir;
use crate::toolchain::{self, InputsKey};
use crate::Example;

/// World exports that clash with a symbol of the QuickJS runtime.
const QJS_CLASHING_EXPORTS: &[&str] = &["init"];

/// Every StarlingMonkey feature `componentize-js -d` disables: all but `stdio`.
const SM_DISABLED_FEATURES: &[&str] = &["random", "clocks", "http", "fetch-event"];

/// Bump when a build recipe below changes, so stamps of older builds stop matching.
const RECIPE: &str = "js-2";

/// Builds every `plugins/examples/js/*/` directory, with both engines.
pub fn plugins() -> Result<()> {
    let target = crate::target_dir(&crate::workspace_root());
    let bin = toolchain::js_bin(&target)?;
    crate::build_examples("js", &mut |ex| {
        Ok(vec![
            quickjs(ex, &bin).context("QuickJS")?,
            starlingmonkey(ex, &bin).context("StarlingMonkey")?,
        ])
    })
}

/// The digest of a JS build's inputs for `engine`.
fn inputs(ex: &Example, engine: &str) -> Result<String> {
    let mut key = InputsKey::new(RECIPE);
    key.text(engine);
    key.text(&toolchain::js_toolchain_id());
    key.text(&ex.world);
    key.dir(&ex.dir)?;
    key.dir(&ex.wit)?;
    Ok(key.finish())
}

/// Builds one plugin directory with QuickJS into `<out_dir>/<name>.wasm`.
pub fn quickjs(ex: &Example, bin: &Path) -> Result<PathBuf> {
    let out = ex.out_dir.join(format!("{}.wasm", ex.name));
    let stamp = ex.work.join("qjs.stamp");
    let key = inputs(ex, "qjs")?;
    if toolchain::fresh(&stamp, &key, &[&out]) {
        eprintln!("{}: inputs unchanged, not rebuilt", out.display());
        return Ok(out);
    }

    let wit_dir = ex.wit.clone();
    let (wit, renames) =
        component::wit_with_renamed_exports(&wit_dir, &ex.world, QJS_CLASHING_EXPORTS)
            .context("step `rename clashing exports`")?;
    let build_wit = ex.work.join("wit-qjs");
    let src = ex.work.join("qjs");
    for dir in [&build_wit, &src] {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(build_wit.join("axle.wit"), wit)?;
    copy_dir(&ex.dir, &src)?;
    fs::write(src.join("entry.js"), entry_module(&renames))?;

    let raw = ex.work.join("raw-qjs.wasm");
    toolchain::run(
        Command::new(bin.join("componentize-qjs"))
            .arg("--wit")
            .arg(&build_wit)
            .args(["--world", &ex.world, "--js"])
            .arg(src.join("entry.js"))
            .arg("--module-root")
            .arg(&src)
            .arg("--sync")
            .arg("-o")
            .arg(&raw)
            .current_dir(&ex.work),
    )
    .context("step `componentize-qjs`")?;

    let bytes = fs::read(&raw)?;
    // componentize-qjs leaves its runtime's build-time entry point exported as `init`
    // (`func(shim, script, entry-path, disable-gc)`, what it pre-initialises with): moved
    // aside, so the world's `init` can take its name. Nothing calls it.
    let (_, exported) = component::interface_names(&bytes)?;
    let mut renames = renames;
    for real in QJS_CLASHING_EXPORTS {
        if exported.contains(*real) {
            renames.push((real.to_string(), format!("componentize-qjs-{real}")));
        }
    }
    let bytes =
        component::rename_exports(&bytes, &renames).context("step `rename exports back`")?;
    let imports = component::check_exports(&bytes, &wit_dir, &ex.world)?;
    fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("{}: imports {}", out.display(), imports.join(" "));
    toolchain::record(&stamp, &key)?;
    Ok(out)
}

/// Builds one plugin directory with StarlingMonkey into `<out_dir>/<name>-sm.wasm`.
pub fn starlingmonkey(ex: &Example, bin: &Path) -> Result<PathBuf> {
    let out = ex.out_dir.join(format!("{}-sm.wasm", ex.name));
    let stamp = ex.work.join("sm.stamp");
    let key = inputs(ex, "sm")?;
    if toolchain::fresh(&stamp, &key, &[&out]) {
        eprintln!("{}: inputs unchanged, not rebuilt", out.display());
        return Ok(out);
    }

    let wit_dir = ex.wit.clone();
    toolchain::run(
        Command::new(bin.join("componentize-js"))
            .arg(ex.dir.join("app.js"))
            .arg("--wit")
            .arg(&wit_dir)
            .args(["-n", &ex.world, "-d"])
            .args(SM_DISABLED_FEATURES)
            .arg("-o")
            .arg(&out)
            .current_dir(&ex.work),
    )
    .context("step `componentize-js`")?;

    let bytes = fs::read(&out)?;
    let imports = component::check_exports(&bytes, &wit_dir, &ex.world)?;
    eprintln!("{}: imports {}", out.display(), imports.join(" "));
    toolchain::record(&stamp, &key)?;
    Ok(out)
}

/// The module componentize-qjs is pointed at: everything `app.js` exports, plus each
/// clashing export under its built name.
fn entry_module(renames: &[(String, String)]) -> String {
    let mut text = String::from(
        "// Generated by xtask: the plugin's `app.js` under the names the build uses.\n\
         export * from \"./app.js\";\n",
    );
    for (built, real) in renames {
        text.push_str(&format!(
            "export {{ {} as {} }} from \"./app.js\";\n",
            camel(real),
            camel(built)
        ));
    }
    text
}

/// A WIT kebab-case name in JS camelCase (`endpoints-changed` -> `endpointsChanged`).
fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
