//! The Python and JS toolchains, installed on first use under `<target>/toolchains/`, and
//! the input stamps that let a build be skipped when nothing that goes into it changed.
//!
//! Both installs are idempotent: a stamp file inside the toolchain directory records what
//! was installed, and a directory whose stamp does not match (an older pin, an install cut
//! short) is removed and installed again.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The componentize-py release the Python plugins are built with.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// What Debian needs for the Python toolchain (`python3 -m venv` needs ensurepip).
const PYTHON_DEBIAN_PACKAGES: &str = "python3 python3-venv python3-pip";

/// What Debian needs for the JS toolchain.
const JS_DEBIAN_PACKAGES: &str = "nodejs npm";

/// The pinned npm packages (componentize-js, componentize-qjs) and their lock file.
const JS_PACKAGE_JSON: &str = include_str!("../js/package.json");
const JS_PACKAGE_LOCK: &str = include_str!("../js/package-lock.json");

/// The file in a toolchain directory that says what was installed there.
const STAMP: &str = ".axle-toolchain";

/// Runs `cmd`; on failure the error carries its exit status and the end of its output.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {shown}"))?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        bail!("{shown} failed ({}):\n{}", out.status, tail(&text, 40));
    }
    Ok(())
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether the toolchain in `dir` was installed from exactly `what`.
fn installed(dir: &Path, what: &str) -> bool {
    fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == what)
}

/// A venv under `<target>/toolchains/py` with componentize-py; returns its executable.
///
/// The venv is made with `$AXLE_PYTHON` if set, else the `python3` on `PATH` (pyenv's or
/// Debian's `/usr/bin/python3`, 3.11; componentize-py ships one abi3 wheel).
pub fn componentize_py(target: &Path) -> Result<PathBuf> {
    let dir = target.join("toolchains/py");
    let exe = dir.join("bin/componentize-py");
    if installed(&dir, COMPONENTIZE_PY) && exe.exists() {
        return Ok(exe);
    }
    let python = std::env::var_os("AXLE_PYTHON").unwrap_or_else(|| "python3".into());
    eprintln!("installing {COMPONENTIZE_PY} into {} (once)", dir.display());
    let _ = fs::remove_dir_all(&dir);
    run(Command::new(&python).args(["-m", "venv"]).arg(&dir)).with_context(|| {
        format!("creating the venv (on Debian: apt-get install -y {PYTHON_DEBIAN_PACKAGES})")
    })?;
    run(Command::new(dir.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(COMPONENTIZE_PY))
    .context("installing componentize-py")?;
    fs::write(dir.join(STAMP), COMPONENTIZE_PY)?;
    Ok(exe)
}

/// `node_modules/.bin` of `<target>/toolchains/js`, where `npm ci` installed the pinned
/// componentize-js and componentize-qjs (`xtask/js/package.json` and its lock file).
pub fn js_bin(target: &Path) -> Result<PathBuf> {
    let dir = target.join("toolchains/js");
    let bin = dir.join("node_modules/.bin");
    let what = js_toolchain_id();
    if installed(&dir, &what) && bin.exists() {
        return Ok(bin);
    }
    for tool in ["node", "npm"] {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!("`{tool}` not found; on Debian: apt-get install -y {JS_DEBIAN_PACKAGES}");
        }
    }
    eprintln!(
        "installing componentize-js and componentize-qjs into {} (once)",
        dir.display()
    );
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::write(dir.join("package.json"), JS_PACKAGE_JSON)?;
    fs::write(dir.join("package-lock.json"), JS_PACKAGE_LOCK)?;
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir))
    .context("installing the JS toolchain")?;
    fs::write(dir.join(STAMP), &what)?;
    Ok(bin)
}

/// What identifies the JS toolchain: the hash of the pinned package files.
pub fn js_toolchain_id() -> String {
    let mut h = blake3::Hasher::new();
    h.update(JS_PACKAGE_JSON.as_bytes());
    h.update(JS_PACKAGE_LOCK.as_bytes());
    format!("npm-lock-{}", &h.finalize().to_hex()[..16])
}

/// A digest of everything that goes into a build, to skip the build when it is unchanged.
pub struct InputsKey(blake3::Hasher);

impl InputsKey {
    pub fn new(what: &str) -> Self {
        let mut key = InputsKey(blake3::Hasher::new());
        key.text(what);
        key
    }

    /// Adds a labelled string (a tool version, a build option).
    pub fn text(&mut self, s: &str) {
        self.0.update(&(s.len() as u64).to_le_bytes());
        self.0.update(s.as_bytes());
    }

    /// Adds every file under `dir` (relative name and contents), in sorted order, skipping
    /// hidden entries and `__pycache__`.
    pub fn dir(&mut self, dir: &Path) -> Result<()> {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') || name == "__pycache__" {
                continue;
            }
            if path.is_dir() {
                self.text(&format!("dir {name}"));
                self.dir(&path)?;
            } else {
                self.text(&format!("file {name}"));
                let bytes =
                    fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                self.0.update(&(bytes.len() as u64).to_le_bytes());
                self.0.update(&bytes);
            }
        }
        Ok(())
    }

    pub fn finish(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// Whether every output exists and `stamp` records `key` (the inputs of the last build).
pub fn fresh(stamp: &Path, key: &str, outputs: &[&Path]) -> bool {
    outputs.iter().all(|o| o.exists()) && fs::read_to_string(stamp).is_ok_and(|s| s == key)
}

/// Records that the outputs now match `key`.
pub fn record(stamp: &Path, key: &str) -> Result<()> {
    fs::write(stamp, key).with_context(|| format!("writing {}", stamp.display()))
}
