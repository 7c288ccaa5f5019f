//! A newcomer's first hour, with the real `axle` binary: a manifest holding only what
//! differs from the defaults, `axle config check` pointing at the line at fault, exit
//! codes a script can tell apart, and `axle swap` saying what a kernel can swap.

use axle_host_tests::{run_axle as axle, text, ServeProcess};

#[test]
fn a_manifest_naming_only_the_echo_endpoints_serves_and_calls() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The provider's manifest names nothing but an endpoint list: slots, plugins and the
    // limiter come from the embedded defaults.
    let serve_manifest = dir.path().join("serve.toml");
    std::fs::write(
        &serve_manifest,
        "[services.echo]\nendpoints = [\"127.0.0.1:7300\"]\n",
    )
    .unwrap();
    let server = ServeProcess::start_with_manifest(Some(&serve_manifest), &[]);
    let call_manifest = dir.path().join("call.toml");
    std::fs::write(
        &call_manifest,
        format!("[services.echo]\nendpoints = [\"{}\"]\n", server.addr),
    )
    .unwrap();
    let manifest = call_manifest.to_str().unwrap();
    let out = axle(
        &["call", "--manifest", manifest, "echo/say", r#"{"hi":1}"#],
        cache.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer, serde_json::json!({"hi": 1}));

    let shown = axle(&["config", "show", "--manifest", manifest], cache.path());
    let shown = text(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "endpoints = [\"{}\"]  # from {manifest}",
            server.addr
        )),
        "{shown}"
    );
    assert!(
        shown.contains("limiter = \"token-bucket\"  # from <embedded plugins.toml>"),
        "{shown}"
    );
}

#[test]
fn config_check_points_at_the_line_and_exits_non_zero() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[services.echo]\nendpoints = [\n  { address = \"127.0.0.1:7300\", wieght = 5 },\n]\n",
    )
    .unwrap();
    let out = axle(
        &["config", "check", "--manifest", bad.to_str().unwrap()],
        cache.path(),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}:3:33: services.echo.endpoints[0].wieght: unknown field `wieght`; did you mean `weight`?",
            bad.display()
        )),
        "{err}"
    );

    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[services.echo]\nendpoints = [\"127.0.0.1:7300\"]\n").unwrap();
    let out = axle(
        &["config", "check", "--manifest", good.to_str().unwrap()],
        cache.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("ok: {}\n", good.display()));
}

#[test]
fn a_failed_call_exits_3_and_bad_flags_exit_2() {
    let cache = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens there, the connect is refused.
    let dead = axle(
        &["call", "--endpoint", "127.0.0.1:1", "echo/say", "{}"],
        cache.path(),
    );
    assert_eq!(dead.status.code(), Some(3), "{}", text(&dead.stderr));
    assert!(text(&dead.stderr).contains("call failed: transport"));
    let usage = axle(&["call", "--no-such-flag", "echo/say", "{}"], cache.path());
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage.stderr));
    let help = axle(&["call", "--help"], cache.path());
    assert!(text(&help.stdout).contains("3 the call failed"));
}

#[test]
fn swap_fills_a_serving_kernels_limiter_and_refuses_a_slot_it_lacks() {
    let cache = tempfile::tempdir().unwrap();
    // A plain `axle serve`: the embedded manifest, whose limiter already runs.
    let plain = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let admin = plain.admin.clone().unwrap();
    let out = axle(
        &["swap", "--admin", &admin, "limiter", "token-bucket"],
        cache.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("unchanged: limiter already runs token-bucket"),
        "{}",
        text(&out.stdout)
    );
    let out = axle(
        &["swap", "--admin", &admin, "selector", "p2c-ewma"],
        cache.path(),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no `selector` slot to swap (it has: limiter"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("swapped"));

    // With a manifest declaring a second limiter, the swap loads it and it limits.
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("m.toml");
    std::fs::write(
        &manifest,
        "[plugins.strict]\nkind = \"limiter\"\ncomponent = \"builtin:token-bucket\"\n\
         [plugins.strict.config]\nrate = 0.001\nburst = 1\n",
    )
    .unwrap();
    let server = ServeProcess::start_with_manifest(Some(&manifest), &["--admin", "127.0.0.1:0"]);
    let admin = server.admin.clone().unwrap();
    let out = axle(
        &["swap", "--admin", &admin, "limiter", "strict"],
        cache.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("swapped limiter -> strict"),
        "{}",
        text(&out.stdout)
    );
    let call = || {
        axle(
            &["call", "--endpoint", &server.addr, "echo/say", "{}"],
            cache.path(),
        )
    };
    let first = call();
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = call();
    assert_eq!(
        second.status.code(),
        Some(3),
        "one token, no refill to speak of"
    );
    assert!(
        text(&second.stderr).contains("rate_limited"),
        "{}",
        text(&second.stderr)
    );
    let out = axle(
        &["swap", "--admin", &admin, "echo.selector", "p2c-ewma"],
        cache.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}
