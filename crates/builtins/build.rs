//! Builds the shipped plugins (`plugins/`) and the bench floor for `wasm32-wasip2` and
//! embeds them, so the `axle` binary runs on its embedded defaults with nothing beside it.
//! This is the one place the shipped plugins are built; `host-tests/build.rs` builds its
//! own hostile fixtures with the same helper.

#[path = "guest_build.rs"]
mod guest_build;

use guest_build::{artifact, build_groups, target_dir, workspace_root};
use std::path::PathBuf;

/// (builtin name, crate, sdk feature group).
const BUILTINS: &[(&str, &str, &str)] = &[
    ("json", "axle-plugin-json", "packed-serializer"),
    ("msgpack", "axle-plugin-msgpack", "packed-serializer"),
    // Their own group: built with the others, every selector would answer runs, and
    // `consistent-hash` picks by the call's hash key, which a run made ahead cannot know.
    (
        "smooth-weighted",
        "axle-plugin-smooth-weighted",
        "run-selector",
    ),
    ("round-robin", "axle-plugin-round-robin", "run-selector"),
    ("random", "axle-plugin-random", "run-selector"),
    (
        "weighted-random",
        "axle-plugin-weighted-random",
        "run-selector",
    ),
    ("zone-aware", "axle-plugin-zone-aware", "selector"),
    ("consistent-hash", "axle-plugin-consistent-hash", "selector"),
    // Their own group: built with the others, cargo's feature unification would give
    // every selector the `two-choice-run-selector` world's exports (declaring no measure).
    (
        "least-active",
        "axle-plugin-least-active",
        "two-choice-run-selector",
    ),
    (
        "p2c-ewma",
        "axle-plugin-p2c-ewma",
        "two-choice-run-selector",
    ),
    (
        "shortest-response",
        "axle-plugin-shortest-response",
        "two-choice-run-selector",
    ),
    ("tag", "axle-plugin-tag", "router"),
    ("condition", "axle-plugin-condition", "router"),
    ("availability", "axle-plugin-availability", "health-scorer"),
    // Its own group: built with the others, every limiter would export an
    // `acquire-lease` that leases nothing, asked in place of `acquire` to no gain.
    (
        "token-bucket",
        "axle-plugin-token-bucket",
        "leasing-limiter",
    ),
    ("sliding-window", "axle-plugin-sliding-window", "limiter"),
    // Its own group: built with the token bucket, cargo's feature unification would give
    // every limiter the `concurrency-limiter` world, and the kernel would call back a
    // `release` that does nothing on each of their requests.
    (
        "adaptive-concurrency",
        "axle-plugin-adaptive-concurrency",
        "concurrency-limiter",
    ),
    // Its own group too: `providers-changed` only where it is wanted.
    (
        "cluster-rate",
        "axle-plugin-cluster-rate",
        "cluster-limiter",
    ),
    ("allow-apps", "axle-plugin-allow-apps", "interceptor"),
    ("tag-map", "axle-plugin-tag-map", "interceptor"),
];

/// The empty component of `axle bench plugins` (the floor every call is compared with).
const FLOOR: (&str, &str) = ("axle-plugin-floor", "floor");

fn main() {
    let root = workspace_root(2);
    for dir in ["plugins", "sdk", "crates/spi", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed=guest_build.rs");
    let target_dir = target_dir(&root);
    let crates: Vec<(&str, &str)> = BUILTINS.iter().map(|b| (b.1, b.2)).chain([FLOOR]).collect();
    build_groups(&root, &target_dir, &crates);

    let mut src = String::from("/// (name, component bytes) of every builtin plugin.\n");
    src.push_str("static BUILTINS: &[(&str, &[u8])] = &[\n");
    for (name, krate, _) in BUILTINS {
        src.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            artifact(&target_dir, krate).display().to_string()
        ));
    }
    src.push_str("];\n");
    src.push_str(&format!(
        "static FLOOR: &[u8] = include_bytes!({:?});\n",
        artifact(&target_dir, FLOOR.0).display().to_string()
    ));
    src.push_str(&format!(
        "static TARGET_DIR: &str = {:?};\n",
        target_dir
            .parent()
            .expect("<target>/wasm")
            .display()
            .to_string()
    ));
    let out = PathBuf::from(guest_build::env("OUT_DIR")).join("builtin.rs");
    std::fs::write(&out, src).expect("write builtin.rs");
}
