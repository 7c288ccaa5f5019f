//! `axle plugins new` writes templates that build with the command their README gives and
//! pass `axle plugins check` with the `plugin.toml` they come with, untouched.
//!
//! Coverage, with CI time in mind: every kind in C (each build well under a second), Rust
//! (the first build compiles the SDK for wasm, later ones reuse it through one shared
//! `CARGO_TARGET_DIR`) and JS on QuickJS (seconds each); the selector alone in Python
//! (componentize-py takes 25-45 s per build) and on StarlingMonkey (10-15 s to build, tens
//! of seconds to compile). C, Python and JS builds use the toolchains `xtask` installs
//! under `<target>/toolchains` (`scripts/test` installs them first).

use std::path::{Path, PathBuf};
use std::process::Command;

use axle_host_tests::axle_bin;

/// The workspace's target directory (`<target>/release/axle` is the binary under test).
fn target_dir() -> PathBuf {
    axle_bin()
        .parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>/axle")
        .to_path_buf()
}

/// The first ```sh block of the generated README: the build command, verbatim.
fn documented_build_command(dir: &Path) -> String {
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let start = readme.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let end = start + readme[start..].find("\n```").expect("end of the block");
    readme[start..end].to_string()
}

/// Generates `lang`/`kind` as `name`, builds it as documented, and checks it.
fn generate_build_check(lang: &str, kind: &str, build_lang: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("t-{lang}-{kind}");
    let dir = tmp.path().join(&name);
    let out = Command::new(axle_bin())
        .args([
            "plugins", "new", "--lang", lang, "--kind", kind, &name, "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plugins new: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut command = documented_build_command(&dir);
    if let Some(other) = build_lang {
        // The README's alternative engine: the same command with another `--lang`.
        command = command.replace(&format!("--lang {lang} "), &format!("--lang {other} "));
    }
    let mut build = Command::new("sh");
    build.arg("-c").arg(&command).current_dir(&dir);
    if lang == "rust" {
        // One target directory for every Rust template of every run: the SDK and
        // wit-bindgen compile once, not once per test.
        build.env("CARGO_TARGET_DIR", target_dir().join("template-builds"));
    }
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "`{command}` failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if lang == "rust" {
        // Where the plugin.toml expects it when CARGO_TARGET_DIR is not set.
        let file = format!("{}.wasm", name.replace('-', "_"));
        let built = target_dir()
            .join("template-builds/wasm32-wasip2/release")
            .join(&file);
        let expected = dir.join("target/wasm32-wasip2/release");
        std::fs::create_dir_all(&expected).unwrap();
        std::fs::copy(built, expected.join(file)).unwrap();
    }

    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(axle_bin())
        .args(["plugins", "check", "--manifest", "plugin.toml"])
        .current_dir(&dir)
        .env("AXLE_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 of 1 plugins ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

macro_rules! template_tests {
    ($($test:ident: $lang:literal, $kind:literal $(, $build_lang:literal)?;)*) => {
        $(
            #[test]
            fn $test() {
                #[allow(unused_mut, unused_assignments)]
                let mut build_lang = None;
                $(build_lang = Some($build_lang);)?
                generate_build_check($lang, $kind, build_lang);
            }
        )*
    };
}

template_tests! {
    c_selector_template_builds_and_checks: "c", "selector";
    c_router_template_builds_and_checks: "c", "router";
    c_health_scorer_template_builds_and_checks: "c", "health-scorer";
    c_limiter_template_builds_and_checks: "c", "limiter";
    c_serializer_template_builds_and_checks: "c", "serializer";
    rust_selector_template_builds_and_checks: "rust", "selector";
    rust_router_template_builds_and_checks: "rust", "router";
    rust_health_scorer_template_builds_and_checks: "rust", "health-scorer";
    rust_limiter_template_builds_and_checks: "rust", "limiter";
    rust_serializer_template_builds_and_checks: "rust", "serializer";
    js_selector_template_builds_and_checks: "js", "selector";
    js_router_template_builds_and_checks: "js", "router";
    js_health_scorer_template_builds_and_checks: "js", "health-scorer";
    js_limiter_template_builds_and_checks: "js", "limiter";
    js_serializer_template_builds_and_checks: "js", "serializer";
    js_starlingmonkey_selector_template_builds_and_checks: "js", "selector", "js-starlingmonkey";
    python_selector_template_builds_and_checks: "python", "selector";
}

#[test]
fn plugins_new_refuses_unknown_kinds_languages_and_names() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            ["--lang", "go", "--kind", "selector", "ok"],
            "unknown language `go`",
        ),
        (
            ["--lang", "c", "--kind", "balancer", "ok"],
            "unknown kind `balancer`",
        ),
        (
            ["--lang", "c", "--kind", "selector", "Bad_Name"],
            "invalid plugin name",
        ),
    ] {
        let out = Command::new(axle_bin())
            .args(["plugins", "new"])
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{stderr}");
    }
    // A directory that is not empty is never overwritten.
    std::fs::write(tmp.path().join("keep"), "x").unwrap();
    let out = Command::new(axle_bin())
        .args([
            "plugins", "new", "--lang", "c", "--kind", "selector", "rr", "--dir",
        ])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
}
