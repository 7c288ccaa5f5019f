//! Builds the hostile fixtures (`fixtures/`) for `wasm32-wasip2`: the tests' own plugins,
//! never shipped. Uses the same guest-build helper as the shipped plugins.

#[path = "../crates/builtins/guest_build.rs"]
mod guest_build;

use guest_build::{artifact, build_groups, target_dir, workspace_root};

/// (crate, sdk feature group) of every fixture.
const FIXTURES: &[(&str, &str)] = &[
    ("axle-fixture-loop-forever", "selector"),
    ("axle-fixture-unbounded-alloc", "selector"),
    ("axle-fixture-trap", "selector"),
    ("axle-fixture-non-candidate", "selector"),
    ("axle-fixture-two-choice", "two-choice-selector"),
    // Its own group: built with the one above, cargo's feature unification would give
    // both the `two-choice-run-selector` world.
    ("axle-fixture-two-choice-runs", "two-choice-run-selector"),
    ("axle-fixture-learning", "learning-selector"),
    ("axle-fixture-hostile", "selector"),
    ("axle-fixture-hostile-limiter", "limiter"),
    ("axle-fixture-hostile-router", "router"),
    ("axle-fixture-hostile-health", "health-scorer"),
    ("axle-fixture-hostile-serializer", "serializer"),
    (
        "axle-fixture-hostile-packed-serializer",
        "packed-serializer",
    ),
    ("axle-fixture-packed-post-return", "packed-serializer"),
    ("axle-fixture-hostile-interceptor", "interceptor"),
];

fn main() {
    let root = workspace_root(1);
    for dir in ["host-tests/fixtures", "sdk", "crates/spi", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed=../crates/builtins/guest_build.rs");
    let target_dir = target_dir(&root);
    build_groups(&root, &target_dir, FIXTURES);
    let dir = artifact(&target_dir, "x");
    let dir = dir.parent().expect("the artifact's folder");
    println!("cargo:rustc-env=AXLE_FIXTURE_DIR={}", dir.display());
    println!(
        "cargo:rustc-env=AXLE_TARGET_DIR={}",
        target_dir.parent().expect("<target>/wasm").display()
    );
}
