//! Builds the guest components (`plugins/`, test fixtures) for `wasm32-wasip2` and embeds
//! the shipped ones in the binary, so `axle` runs on its embedded defaults with nothing
//! beside it.
//!
//! Each plugin kind is built in its own cargo invocation: `axle-sdk` enables one WIT world
//! per crate feature, and cargo unifies features within an invocation, which would hand a
//! selector the exports of every kind. A separate target directory avoids waiting on the
//! lock the outer build holds.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "plugin";

/// (builtin name, crate, sdk feature group). Groups are built together.
const BUILTINS: &[(&str, &str, &str)] = &[
    ("json", "axle-plugin-json", "serializer"),
    ("msgpack", "axle-plugin-msgpack", "serializer"),
    ("round-robin", "axle-plugin-round-robin", "selector"),
    ("random", "axle-plugin-random", "selector"),
    ("weighted-random", "axle-plugin-weighted-random", "selector"),
    ("least-active", "axle-plugin-least-active", "selector"),
    ("p2c-ewma", "axle-plugin-p2c-ewma", "selector"),
    ("tag", "axle-plugin-tag", "router"),
    ("availability", "axle-plugin-availability", "health-scorer"),
    ("token-bucket", "axle-plugin-token-bucket", "limiter"),
];

/// Built but not embedded: the bench floor and the hostile fixtures of `host-tests/`.
const EXTRA: &[(&str, &str)] = &[
    ("axle-plugin-floor", "floor"),
    ("axle-fixture-loop-forever", "selector"),
    ("axle-fixture-unbounded-alloc", "selector"),
    ("axle-fixture-trap", "selector"),
    ("axle-fixture-non-candidate", "selector"),
];

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("kernel/ has a parent")
        .to_path_buf();
    for dir in [
        "plugins",
        "sdk",
        "wit",
        "host-tests/fixtures",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("target"))
        .join("wasm");
    ensure_target();

    let mut groups: Vec<&str> = BUILTINS
        .iter()
        .map(|b| b.2)
        .chain(EXTRA.iter().map(|e| e.1))
        .collect();
    groups.dedup();
    groups.sort();
    groups.dedup();
    for group in groups {
        let crates: Vec<&str> = BUILTINS
            .iter()
            .filter(|b| b.2 == group)
            .map(|b| b.1)
            .chain(EXTRA.iter().filter(|e| e.1 == group).map(|e| e.0))
            .collect();
        build(&root, &target_dir, &crates);
    }

    let out_dir = target_dir.join(TARGET).join(PROFILE);
    let artifact = |krate: &str| out_dir.join(format!("{}.wasm", krate.replace('-', "_")));
    let mut src = String::from("/// (name, component bytes) of every builtin plugin.\n");
    src.push_str("static BUILTINS: &[(&str, &[u8])] = &[\n");
    for (name, krate, _) in BUILTINS {
        src.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            artifact(krate).display().to_string()
        ));
    }
    src.push_str("];\n");
    src.push_str(&format!(
        "static FLOOR: &[u8] = include_bytes!({:?});\n",
        artifact("axle-plugin-floor").display().to_string()
    ));
    src.push_str(&format!(
        "static BUILD_DIR: &str = {:?};\n",
        out_dir.display().to_string()
    ));
    let out = PathBuf::from(env("OUT_DIR")).join("builtin.rs");
    std::fs::write(&out, src).expect("write builtin.rs");
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("cargo sets {key}"))
}

/// Installs the wasm32-wasip2 standard library through rustup when it is missing.
fn ensure_target() {
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

fn build(root: &Path, target_dir: &Path, crates: &[&str]) {
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
