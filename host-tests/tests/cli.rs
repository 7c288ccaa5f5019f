//! The `axle` binary as a user runs it: real processes, exit codes, output.

use axle_host_tests::{built_component, run_axle as axle, text};

#[test]
fn plugins_check_loads_the_embedded_defaults_then_hits_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let n = axle::manifest::Manifest::embedded().unwrap().plugins.len();
    assert!(n >= 10, "the embedded manifest ships its plugins");
    let first = axle(&["plugins", "check"], cache.path());
    let out = text(&first.stdout);
    assert!(first.status.success(), "{out}\n{}", text(&first.stderr));
    assert!(out.contains(&format!("{n} of {n} plugins ok")), "{out}");
    assert_eq!(out.matches(" ok\n").count(), n, "{out}");
    assert!(out.contains("(0 cache hits)"), "{out}");

    let second = axle(&["plugins", "check"], cache.path());
    let out = text(&second.stdout);
    assert!(second.status.success());
    assert!(
        out.contains(&format!("({n} cache hits)")),
        "a restart compiles nothing: {out}"
    );
}

#[test]
fn plugins_check_fails_naming_the_plugin_and_the_reason() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.rr]\nkind = \"selector\"\ncomponent = \"builtin:round-robin\"\n\n\
             [plugins.oops]\nkind = \"selector\"\ncomponent = \"builtin:json\"\n\n\
             [plugins.boom]\nkind = \"selector\"\ncomponent = {:?}\n",
            built_component("axle_fixture_trap").to_str().unwrap()
        ),
    )
    .unwrap();
    let run = axle(
        &["plugins", "check", "--manifest", manifest.to_str().unwrap()],
        cache.path(),
    );
    let out = text(&run.stdout);
    assert!(!run.status.success());
    assert!(out.contains("1 of 3 plugins ok"), "{out}");
    assert!(
        out.contains("does not implement the `selector` world"),
        "{out}"
    );
    assert!(
        out.contains("FAILED self-check"),
        "the trapping fixture fails its self-check: {out}"
    );
    let err = text(&run.stderr);
    assert!(err.contains("plugin `oops` (builtin:json)"));
    // The SDK's panic hook logs where and why, as one line with the plugin's name.
    assert!(
        err.lines().any(|l| l.contains("boom")
            && l.contains("panicked at")
            && l.contains("fixture: trapping on purpose")),
        "the panic's message in the log: {err}"
    );
}

#[test]
fn a_broken_manifest_fails_with_file_key_and_reason() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"builtin:round-robin\"\ntimeout = 5\n", "plugins.rr", "unknown field `timeout`"),
        ("[plugins.rr]\nkind = \"balancer\"\ncomponent = \"builtin:round-robin\"\n", "plugins.rr.kind", "unknown value `balancer`"),
        ("[slots]\nselector = \"nope\"\n", "slots.selector", "no plugin named `nope`"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"builtin:round-robin\"\ninstances = 0\n", "plugins.rr.instances", "must be 1..="),
        ("[plugins.rr\n", ".toml:1:", "not valid TOML"),
    ];
    for (i, (body, key, reason)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("m{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let run = axle(
            &["plugins", "check", "--manifest", path.to_str().unwrap()],
            cache.path(),
        );
        let err = text(&run.stderr);
        assert!(!run.status.success(), "case {i}");
        assert!(
            err.contains(path.to_str().unwrap()),
            "names the file: {err}"
        );
        assert!(err.contains(key), "names the key {key}: {err}");
        assert!(err.contains(reason), "says {reason}: {err}");
    }
}

#[test]
fn bench_plugins_prints_one_json_object_with_the_floor_and_native_twins() {
    let cache = tempfile::tempdir().unwrap();
    let run = axle(&["bench", "plugins", "--json"], cache.path());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    assert!(report["floor_ns"].as_f64().unwrap() > 0.0);
    let rows = report["plugins"].as_array().unwrap();
    let find = |name: &str, function: &str, param: &str| {
        rows.iter()
            .find(|r| r["name"] == name && r["function"] == function && r["param"] == param)
            .unwrap_or_else(|| panic!("no row {name} {function} {param}"))
    };
    for n in ["10", "1000", "10000"] {
        for s in [
            "smooth-weighted",
            "round-robin",
            "random",
            "weighted-random",
            "least-active",
            "p2c-ewma",
            "shortest-response",
            "consistent-hash",
        ] {
            let row = find(s, "select", n);
            assert_eq!(row["kind"], "selector");
            assert!(row["wasm_ns"].as_f64().unwrap() > 0.0);
            assert!(
                row["native_ns"].as_f64().unwrap() > 0.0,
                "{s} has a native twin"
            );
        }
        find("tag", "route", n);
    }
    for size in ["64B", "1KiB", "64KiB", "record"] {
        for s in ["json", "msgpack"] {
            for function in ["encode", "decode"] {
                // Timed in turns with the twin: both readings are numbers (an untimed
                // best would be infinite, and JSON null).
                let row = find(s, function, size);
                assert!(row["wasm_ns"].as_f64().unwrap() > 0.0, "{row}");
                assert!(row["native_ns"].as_f64().unwrap() > 0.0, "{row}");
            }
        }
        let floor = report["bytes_floor"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["param"] == size)
            .unwrap_or_else(|| panic!("no byte floor at {size}"));
        assert!(floor["ns"].as_f64().unwrap() > 0.0, "{floor}");
    }
    find("token-bucket", "acquire", "-");
    find("availability", "score", "-");
    for row in rows {
        for key in ["name", "kind", "function", "param", "wasm_ns", "native_ns"] {
            assert!(row.get(key).is_some(), "row has {key}: {row}");
        }
        assert!(
            row["floor_ns"].as_f64().unwrap() > 0.0,
            "each row's floor, measured beside it: {row}"
        );
    }
}

#[test]
fn call_prints_the_answer_and_names_the_error_class_on_failure() {
    let cache = tempfile::tempdir().unwrap();
    let server = axle_host_tests::ServeProcess::start(&[]);
    let ok = axle(
        &[
            "call",
            "--endpoint",
            &server.addr,
            "echo/say",
            r#"{"a":[1,{"b":null}]}"#,
        ],
        cache.path(),
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(answer, serde_json::json!({"a": [1, {"b": null}]}));

    let missing = axle(
        &[
            "call",
            "--endpoint",
            &server.addr,
            "kv/get",
            r#"{"key":"none"}"#,
        ],
        cache.path(),
    );
    assert_eq!(missing.status.code(), Some(3));
    assert!(
        text(&missing.stderr).contains("call failed: business: no key `none`"),
        "{}",
        text(&missing.stderr)
    );

    let refused = axle(
        &["call", "--endpoint", "127.0.0.1:1", "echo/say", "{}"],
        cache.path(),
    );
    assert_eq!(refused.status.code(), Some(3));
    assert!(
        text(&refused.stderr).contains("call failed: transport: cannot connect"),
        "{}",
        text(&refused.stderr)
    );

    let bad = axle(
        &["call", "--endpoint", &server.addr, "echo", "{}"],
        cache.path(),
    );
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("SERVICE/METHOD"));
}

#[test]
fn demo_runs_three_providers_and_reports_each() {
    let cache = tempfile::tempdir().unwrap();
    let run = axle(
        &["demo", "--seconds", "1", "--concurrency", "8"],
        cache.path(),
    );
    let out = text(&run.stdout);
    assert!(run.status.success(), "{out}\n{}", text(&run.stderr));
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("127.0.0.1:"))
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for row in rows {
        let requests: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(requests > 0, "{row}");
        // The default selector on equal weights (smooth-weighted is round-robin then):
        // each provider carries a third.
        assert!(row.contains("33."), "{row}");
    }
    assert!(out.contains("requests in"), "{out}");
}

#[test]
fn bench_rpc_prints_every_system_and_the_ratios_over_its_rounds() {
    let cache = tempfile::tempdir().unwrap();
    let run = axle(
        &["bench", "rpc", "--json", "--seconds", "0.3"],
        cache.path(),
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    let rows = report["rows"].as_array().unwrap();
    for system in ["axle", "axle-tls", "raw", "tonic", "tarpc"] {
        for c in [1, 64] {
            let row = rows
                .iter()
                .find(|r| r["system"] == system && r["concurrency"] == c)
                .unwrap_or_else(|| panic!("no row {system} c={c}"));
            assert!(row["requests"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(row["errors"], 0, "{row}");
            assert!(row["p99_us"].as_f64().unwrap() >= row["p50_us"].as_f64().unwrap());
        }
    }
    // Three rounds by default, each 0.1 s of the 0.3 asked for: a row adds them up.
    assert_eq!(report["rounds"], 3);
    assert_eq!(report["ratios"]["rounds"], 3);
    for row in rows {
        let seconds = row["seconds"].as_f64().unwrap();
        assert!((0.3..5.0).contains(&seconds), "{row}");
    }
    let axle_vs_raw = report["ratios"]["axle_vs_raw"].as_f64().unwrap();
    let [low, high] = [0, 1].map(|i| report["ratios"]["axle_vs_raw_range"][i].as_f64().unwrap());
    assert!(
        0.0 < low && low <= axle_vs_raw && axle_vs_raw <= high,
        "{report}"
    );
    assert!(report["ratios"]["tls_vs_plain"].as_f64().unwrap() > 0.0);
    assert!(report["ratios"]["axle_vs_tarpc"].as_f64().unwrap() > 0.0);
    assert_eq!(report["payload_bytes"], 1024);

    // One cell, asked for: one row per system, in as many rounds as asked.
    let run = axle(
        &[
            "bench",
            "rpc",
            "--json",
            "--system",
            "raw",
            "--concurrency",
            "4",
            "--rounds",
            "2",
            "--seconds",
            "0.2",
        ],
        cache.path(),
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(
        (&rows[0]["system"], &rows[0]["concurrency"]),
        (&"raw".into(), &4.into())
    );
    assert_eq!(report["rounds"], 2);
    // No `axle` row, no ratio to read.
    assert!(report["ratios"].is_null(), "{report}");
}

#[test]
fn config_explain_shows_each_value_and_its_tier() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = axle_host_tests::manifest_with_governance(dir.path(), "break-ms = 777");
    let run = axle(
        &[
            "config",
            "explain",
            "kv/get",
            "--manifest",
            path.to_str().unwrap(),
        ],
        cache.path(),
    );
    let out = text(&run.stdout);
    assert!(run.status.success(), "{out}");
    let row = |key: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("idempotent"), ["true", "method"]);
    assert_eq!(row("break-ms"), ["777", "global"]);
    assert_eq!(row("retries"), ["2", "global"]);
    assert_eq!(row("half-open-probes"), ["3", "default"]);

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[services.kv.methods.get]\nretries = 99\n").unwrap();
    let run = axle(
        &[
            "config",
            "explain",
            "kv/get",
            "--manifest",
            bad.to_str().unwrap(),
        ],
        cache.path(),
    );
    let err = text(&run.stderr);
    assert!(!run.status.success());
    assert!(
        err.contains("services.kv.methods.get.retries") && err.contains("between 0 and 10"),
        "{err}"
    );
}

#[test]
fn axle_cache_shows_prunes_and_clears_its_own_artifacts_and_refuses_a_shared_directory() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    // Fill it the real way: a check compiles every embedded plugin into the cache.
    assert!(axle(&["plugins", "check"], &cache).status.success());
    let entries = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect::<Vec<_>>()
    };
    let ours = entries(&cache).len();
    assert!(ours >= 10, "one artifact per plugin: {:?}", entries(&cache));
    std::fs::write(
        cache.join("0000-ffffffffffffffff.cwasm"),
        b"another engine's",
    )
    .unwrap();
    std::fs::write(cache.join(".tmp-deadbeef"), b"a crash's leftover").unwrap();
    std::fs::write(cache.join("README"), b"not axle's").unwrap();

    let dir = axle(&["cache", "dir"], &cache);
    assert_eq!(text(&dir.stdout).trim(), cache.display().to_string());
    let prune = axle(&["cache", "prune"], &cache);
    assert!(
        text(&prune.stdout).contains("removed 2 file(s)"),
        "{}",
        text(&prune.stdout)
    );
    assert_eq!(
        entries(&cache).len(),
        ours + 1,
        "this engine's artifacts and the README stay"
    );
    let clear = axle(&["cache", "clear"], &cache);
    assert!(text(&clear.stdout).contains(&format!("removed {ours} file(s)")));
    assert_eq!(entries(&cache), ["README"]);

    // A directory others may write to is never used: plugins are compiled instead.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let dir = axle(&["cache", "dir"], &cache);
    assert!(
        text(&dir.stdout).contains("not used"),
        "{}",
        text(&dir.stdout)
    );
    let check = axle(&["plugins", "check"], &cache);
    assert!(check.status.success());
    assert!(
        text(&check.stderr).contains("not caching compiled plugins"),
        "{}",
        text(&check.stderr)
    );
    assert_eq!(entries(&cache), ["README"], "nothing written there");
}

#[test]
fn axle_bench_hostile_runs_every_case_and_quarantines_the_broken_ones() {
    let cache = tempfile::tempdir().unwrap();
    let out = axle(
        &["bench", "hostile", "--seconds", "0.3", "--json"],
        cache.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), axle_bench::hostile::CASES.len(), "{report}");
    let row = |case: &str| {
        rows.iter()
            .find(|r| r["case"] == case)
            .unwrap_or_else(|| panic!("{case} in {report}"))
    };
    assert_eq!(row("baseline: round-robin")["safe_defaults"], 0);
    assert_eq!(row("the fixture, behaving")["safe_defaults"], 0);
    for case in [
        "panics on every call",
        "spins on every call",
        "sleeps on every call",
    ] {
        let r = row(case);
        assert!(r["quarantine_trips"].as_u64().unwrap() >= 1, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
    assert!(
        row("  with a 500 µs slow budget")["quarantine_trips"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn perf_map_names_plugin_code_only_when_asked() {
    let cache = tempfile::tempdir().unwrap();
    // Another process of the same id may have left a map behind: only one written since
    // this run started counts.
    let run = |perf_map: &str| {
        let started = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
        let child = std::process::Command::new(axle_host_tests::axle_bin())
            .args(["plugins", "check"])
            .env("AXLE_CACHE_DIR", cache.path())
            .env("AXLE_PERF_MAP", perf_map)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run axle");
        let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let fresh = std::fs::metadata(&map)
            .and_then(|m| m.modified())
            .is_ok_and(|at| at >= started);
        let written = fresh.then(|| std::fs::read_to_string(&map).ok()).flatten();
        let _ = std::fs::remove_file(&map);
        written
    };
    // Compiled on the first run, loaded from the cache on the second: both are named.
    for _ in 0..2 {
        let map = run("1").expect("AXLE_PERF_MAP=1 writes /tmp/perf-PID.map");
        // Builtins are stripped of names, so their functions read `wasm[M]::function[F]`;
        // a component built with its name section shows the source's names instead.
        let line = map
            .lines()
            .find(|l| l.contains("::function["))
            .unwrap_or_else(|| panic!("plugin functions are named:\n{map}"));
        let mut parts = line.split(' ');
        let mut hex = || {
            let field = parts.next().unwrap_or_default();
            u64::from_str_radix(field.trim_start_matches("0x"), 16)
                .unwrap_or_else(|e| panic!("{field:?} in {line:?}: {e}"))
        };
        let (start, len) = (hex(), hex());
        assert!(start > 0 && len > 0, "an address and a length: {line}");
    }
    assert_eq!(run("0"), None, "0 writes no map");
}
