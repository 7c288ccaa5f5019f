//! `axle plugins new` writes templates that build with the command their README gives and
//! pass `axle plugins check` with the `plugin.toml` they come with, untouched.
//!
//! Coverage, with CI time in mind: every kind in C (each build well under a second), Rust
//! (the first build compiles the SDK for wasm, later ones reuse it through one shared
//! `CARGO_TARGET_DIR`) and JS on QuickJS (seconds each); in Python (componentize-py takes
//! 25-45 s per build) the selector and the interceptor, the newest kind; on StarlingMonkey
//! (10-15 s to build, tens of seconds to compile) the selector alone. C, Python and JS builds use the toolchains `xtask` installs
//! under `<target>/toolchains` (`scripts/test` installs them first).
//!
//! The interceptor template, once checked, is also loaded by a real `axle serve` in its
//! `server-interceptors` slot with a config, and called: a denied application is refused
//! with `forbidden`, a request without the required tag with `bad_request`, anyone else
//! passes, in each of the four languages.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use axle::client::CallOptions;
use axle::manifest::EndpointSpec;
use axle::plugin::PluginHost;
use axle_host_tests::{axle_bin, client_for, rt, ServeProcess};

/// The workspace's target directory (`<target>/release/axle` is the binary under test).
fn target_dir() -> PathBuf {
    axle_bin()
        .parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>/axle")
        .to_path_buf()
}

/// The repository these tests belong to.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host-tests sits in the repository")
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
    let mut new = Command::new(axle_bin());
    new.args([
        "plugins", "new", "--lang", lang, "--kind", kind, &name, "--dir",
    ])
    .arg(&dir);
    if lang == "rust" {
        // Against this checkout's SDK (the by-version dependency is built against the
        // packaged SDK in its own test below).
        new.arg("--sdk-path").arg(repo().join("sdk"));
    }
    let out = new.output().unwrap();
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
    if kind == "interceptor" {
        assert_access_check(&dir, &name, cache.path());
    }
}

/// The built interceptor template in a provider's `server-interceptors` slot, configured
/// to deny `batch` and `legacy` and to require the tag `tenant`: its verdicts reach callers
/// as the template's source describes them.
fn assert_access_check(dir: &Path, name: &str, cache: &Path) {
    let mut entry = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    if !entry.contains("timeout-ms") {
        // Room for a loaded test machine (the entry's last table is the plugin's own).
        entry.push_str("timeout-ms = 1000\n");
    }
    let manifest = dir.join("serve.toml");
    std::fs::write(
        &manifest,
        format!(
            "{entry}\n[plugins.{name}.config]\ndeny = [\"batch\", \"legacy\"]\n\
             require-tag = \"tenant\"\n\n[slots]\nserver-interceptors = [\"{name}\"]\n"
        ),
    )
    .unwrap();
    let cache_env = cache.to_str().expect("a UTF-8 temp path");
    let server = ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_CACHE_DIR", cache_env)],
    );
    let host = PluginHost::new(Some(cache.to_path_buf())).unwrap();
    let client = client_for(
        &host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(server.addr.clone())],
    );
    let runtime = rt();
    let call = |app: Option<&str>, tags: &[(&str, &str)]| -> Result<(), String> {
        let mut options = CallOptions::timeout(Duration::from_secs(10));
        options.consumer_app = app.map(str::to_string);
        for (k, v) in tags {
            options = options.tag(*k, *v);
        }
        let body = bytes::Bytes::from_static(b"hello");
        match runtime.block_on(client.call_raw("echo", "say", body, &options)) {
            Ok(reply) if reply.payload.as_ref() == b"hello" => Ok(()),
            Ok(reply) => panic!("echo answered {:?}", reply.payload),
            Err(e) => Err(format!("{}: {e}", e.class())),
        }
    };
    let tenant = [("tenant", "acme")];
    let shapes = [
        (Some("web"), &tenant[..], None),
        (None, &tenant[..], None),
        (Some("batch"), &tenant[..], Some("forbidden")),
        (Some("legacy"), &[][..], Some("forbidden")),
        (Some("web"), &[][..], Some("bad_request")),
        (Some("web"), &[("lane", "canary")][..], Some("bad_request")),
    ];
    // Twice: the second round's answers come from the kernel's memo, as the template's
    // declaration (no per-call part read) allows.
    for (app, tags, expected) in shapes.iter().chain(shapes.iter()).copied() {
        let answer = call(app, tags);
        match (expected, &answer) {
            (None, Ok(())) => {}
            (Some(class), Err(e)) if e.starts_with(&format!("{class}: ")) => {
                // The refusal names who or what, as the template words it.
                let why = if class == "forbidden" {
                    format!("application `{}` may not call echo/say", app.unwrap())
                } else {
                    "echo/say needs the tag `tenant`".to_string()
                };
                assert!(e.contains(&why), "{name}: {e}");
            }
            _ => panic!("{name}: app {app:?} tags {tags:?}: expected {expected:?}, got {answer:?}"),
        }
    }
    let admin = server.admin.clone().expect("--admin prints its address");
    let counts = |report: &serde_json::Value| {
        report["servers"][0]["plugins"]
            .as_array()
            .and_then(|rows| rows.iter().find(|row| row["name"] == name))
            .map(|row| row["intercept"].clone())
            .unwrap_or_else(|| panic!("{name}'s counters in {report}"))
    };
    // The counters follow the answers; wait (bounded) until all twelve calls are counted.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = counts(&axle_host_tests::admin_stats(&admin));
    while seen["calls"] != 12 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        seen = counts(&axle_host_tests::admin_stats(&admin));
    }
    assert_eq!(seen["calls"], 12, "{name}: {seen}");
    assert_eq!(seen["refusals"], 8, "{name}: {seen}");
    assert_eq!(seen["passes"], 4, "{name}: {seen}");
    assert_eq!(seen["faults"], 0, "{name}: {seen}");
    let memo_hits = seen["memo_hits"].as_u64().unwrap_or(0);
    assert!(
        memo_hits >= 6,
        "{name}: the repeated shapes are memoised: {seen}"
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
    c_interceptor_template_builds_and_checks: "c", "interceptor";
    rust_selector_template_builds_and_checks: "rust", "selector";
    rust_router_template_builds_and_checks: "rust", "router";
    rust_health_scorer_template_builds_and_checks: "rust", "health-scorer";
    rust_limiter_template_builds_and_checks: "rust", "limiter";
    rust_serializer_template_builds_and_checks: "rust", "serializer";
    rust_interceptor_template_builds_and_checks: "rust", "interceptor";
    js_selector_template_builds_and_checks: "js", "selector";
    js_router_template_builds_and_checks: "js", "router";
    js_health_scorer_template_builds_and_checks: "js", "health-scorer";
    js_limiter_template_builds_and_checks: "js", "limiter";
    js_serializer_template_builds_and_checks: "js", "serializer";
    js_interceptor_template_builds_and_checks: "js", "interceptor";
    js_starlingmonkey_selector_template_builds_and_checks: "js", "selector", "js-starlingmonkey";
    python_selector_template_builds_and_checks: "python", "selector";
    python_interceptor_template_builds_and_checks: "python", "interceptor";
}

/// The Rust interceptor template carries unit tests of its access check (deny list,
/// unnamed callers, the required tag, bad config): as generated, they pass natively with
/// plain `cargo test`, the SDK's promise that the same code runs without wasm.
#[test]
fn the_rust_interceptor_templates_own_tests_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-gate");
    let out = Command::new(axle_bin())
        .args([
            "plugins",
            "new",
            "--lang",
            "rust",
            "--kind",
            "interceptor",
            "t-gate",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--sdk-path")
        .arg(repo().join("sdk"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO"))
        .args(["test", "-q"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir().join("template-builds"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("3 passed"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// A Rust template as generated, depending on `axle-sdk` by version, builds in a directory
/// outside the repository against the SDK as `cargo package` packs it (what crates.io
/// would serve): the package carries its WIT, nothing reaches back into the checkout.
/// C, Python and JS templates carry the WIT package themselves.
#[test]
fn a_rust_template_builds_by_version_against_the_packaged_sdk() {
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed");
    let out = Command::new(env!("CARGO"))
        .args(["package", "-q", "-p", "axle-spi", "-p", "axle-sdk"])
        .args(["--no-verify", "--allow-dirty", "--target-dir"])
        .arg(&packed)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo package: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unpacked = tmp.path().join("crates");
    std::fs::create_dir_all(&unpacked).unwrap();
    for krate in ["axle-spi", "axle-sdk"] {
        let file = packed.join(format!("package/{krate}-0.1.0.crate"));
        let status = Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .unwrap();
        assert!(status.success(), "unpacking {}", file.display());
    }
    assert!(unpacked.join("axle-sdk-0.1.0/wit/kinds.wit").is_file());

    let dir = tmp.path().join("t-by-version");
    let out = Command::new(axle_bin())
        .args(["plugins", "new", "--lang", "rust", "--kind", "limiter"])
        .args(["t-by-version", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"axle-sdk = { version = "0.1.0", features = ["limiter"] }"#),
        "{manifest}"
    );
    // What a user does until the SDK is published: patch crates.io with the packages.
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    std::fs::write(
        dir.join(".cargo/config.toml"),
        format!(
            "[patch.crates-io]\naxle-sdk = {{ path = {:?} }}\naxle-spi = {{ path = {:?} }}\n",
            unpacked.join("axle-sdk-0.1.0"),
            unpacked.join("axle-spi-0.1.0")
        ),
    )
    .unwrap();
    let mut build = Command::new("sh");
    build
        .arg("-c")
        .arg(documented_build_command(&dir))
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir().join("template-builds"));
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(target_dir()
        .join("template-builds/wasm32-wasip2/release/t_by_version.wasm")
        .is_file());
}

#[test]
fn c_python_and_js_templates_carry_the_wit_package() {
    let tmp = tempfile::tempdir().unwrap();
    for lang in ["c", "python", "js"] {
        let dir = tmp.path().join(lang);
        let out = Command::new(axle_bin())
            .args([
                "plugins", "new", "--lang", lang, "--kind", "router", "r", "--dir",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success());
        for file in ["kinds.wit", "types.wit"] {
            let ours = std::fs::read_to_string(repo().join("sdk/wit").join(file)).unwrap();
            let theirs = std::fs::read_to_string(dir.join("wit").join(file)).unwrap();
            assert_eq!(ours, theirs, "{lang}: wit/{file} as the SDK ships it");
        }
    }
}
