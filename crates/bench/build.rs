//! Builds the hostile selector of `axle bench hostile` (the host-tests fixture
//! `axle-fixture-hostile`) for `wasm32-wasip2` and embeds it, so the bench runs from the
//! binary alone.

#[path = "../builtins/guest_build.rs"]
mod guest_build;

use guest_build::{artifact, build_groups, target_dir, workspace_root};
use std::path::PathBuf;

fn main() {
    let root = workspace_root(2);
    for dir in [
        "host-tests/fixtures/hostile",
        "host-tests/fixtures/misbehave",
        "sdk",
        "crates/spi",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed=../builtins/guest_build.rs");
    let target_dir = target_dir(&root);
    build_groups(&root, &target_dir, &[("axle-fixture-hostile", "selector")]);
    let src = format!(
        "/// The hostile selector (`host-tests/fixtures/hostile`).\n\
         pub static HOSTILE_SELECTOR: &[u8] = include_bytes!({:?});\n",
        artifact(&target_dir, "axle-fixture-hostile")
            .display()
            .to_string()
    );
    let out = PathBuf::from(guest_build::env("OUT_DIR")).join("hostile.rs");
    std::fs::write(out, src).expect("write hostile.rs");
}
