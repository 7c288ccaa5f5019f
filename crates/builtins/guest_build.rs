//! Building guest components for `wasm32-wasip2` from a build script: shared by the
//! shipped plugins' build (`crates/builtins/build.rs`) and the hostile fixtures'
//! (`host-tests/build.rs`), included by path so neither copies the other.
//!
//! Each plugin kind is built in its own cargo invocation: `axle-sdk` enables one WIT world
//! per crate feature, and cargo unifies features within an invocation, which would hand a
//! selector the exports of every kind. A separate target directory avoids waiting on the
//! lock the outer build holds.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const TARGET: &str = "wasm32-wasip2";
pub const PROFILE: &str = "plugin";

/// The workspace root, from a build script of a crate `depth` folders below it.
pub fn workspace_root(depth: usize) -> PathBuf {
    let mut dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    for _ in 0..depth {
        dir = dir
            .parent()
            .expect("the workspace root is above")
            .to_path_buf();
    }
    dir
}

/// Where guest builds put their output: `<target>/wasm`, beside the host build.
pub fn target_dir(root: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("target"))
        .join("wasm")
}

/// Builds `(crate, sdk feature group)` pairs, one cargo invocation per group.
pub fn build_groups(root: &Path, target_dir: &Path, crates: &[(&str, &str)]) {
    ensure_target();
    let mut groups: Vec<&str> = crates.iter().map(|c| c.1).collect();
    groups.sort();
    groups.dedup();
    for group in groups {
        let members: Vec<&str> = crates
            .iter()
            .filter(|c| c.1 == group)
            .map(|c| c.0)
            .collect();
        build(root, target_dir, &members);
    }
}

/// The component a guest crate's build produced.
pub fn artifact(target_dir: &Path, krate: &str) -> PathBuf {
    target_dir
        .join(TARGET)
        .join(PROFILE)
        .join(format!("{}.wasm", krate.replace('-', "_")))
}

pub fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("cargo sets {key}"))
}

/// Installs the wasm32-wasip2 standard library through rustup when it is missing.
pub fn ensure_target() {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let installed = sysroot
        .map(|s| Path::new(&s).join("lib/rustlib").join(TARGET).exists())
        .unwrap_or(false);
    if installed {
        return;
    }
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        panic!(
            "the {TARGET} target is not installed and `rustup target add {TARGET}` failed; \
             install it, then build again"
        );
    }
}

pub fn build(root: &Path, target_dir: &Path, crates: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(target_dir);
    for c in crates {
        cmd.args(["-p", c]);
    }
    // What the outer build set for the host must not leak into the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_PROFILE_") || key.starts_with("CARGO_CFG_") {
            cmd.env_remove(key);
        }
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    if !output.status.success() {
        panic!(
            "building the guest components {crates:?} for {TARGET} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
