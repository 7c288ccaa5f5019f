//! Plugins written in other WASI languages pass the same behavioural tests as their Rust
//! twins, through the same host: the WIT is the contract, not the Rust SDK.

use axle_host_tests::{assert_round_robin, axle_bin, example_component, manifest, TestHost};

#[test]
fn c_round_robin_behaves_like_the_rust_one() {
    let path = example_component("c", "round-robin");
    let t = TestHost::new();
    let p = t
        .load(
            &manifest("rr-c", "selector", path.to_str().unwrap(), ""),
            "rr-c",
        )
        .unwrap();
    assert_round_robin(&p);
}

#[test]
fn c_round_robin_rejects_unknown_config_keys_at_load() {
    let path = example_component("c", "round-robin");
    let t = TestHost::new();
    let text = manifest(
        "rr-c",
        "selector",
        path.to_str().unwrap(),
        "[plugins.rr-c.config]\nspeed = 3",
    );
    let msg = t
        .load(&text, "rr-c")
        .err()
        .expect("config rejected")
        .to_string();
    assert!(msg.contains("unknown key `speed`"), "{msg}");
}

#[test]
fn axle_plugins_check_accepts_the_c_plugin() {
    let path = example_component("c", "round-robin");
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest_path,
        manifest("rr-c", "selector", path.to_str().unwrap(), ""),
    )
    .unwrap();
    let out = std::process::Command::new(axle_bin())
        .args([
            "plugins",
            "check",
            "--manifest",
            manifest_path.to_str().unwrap(),
        ])
        .env("AXLE_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("1 of 1 plugins ok"), "{stdout}");
}
