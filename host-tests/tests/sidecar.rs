//! The whole path with real processes: Node (examples/greeter-caller) → its sidecar →
//! Axle → a provider's sidecar → Python (examples/greeter-provider), the two sides
//! finding each other through etcd. One of two Python providers is killed under load:
//! no idempotent call fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use axle_host_tests::etcd::{wait_until, Etcd};
use axle_host_tests::http::{post, AxleProcess};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A Python provider and its sidecar, registered in etcd.
struct PythonProvider {
    app: AxleProcess,
    sidecar: AxleProcess,
}

impl PythonProvider {
    fn start(registry: &str) -> PythonProvider {
        let mut python = Command::new("python3");
        python.arg(examples().join("greeter-provider/app.py"));
        let app = AxleProcess::spawn(python, "listening on ");
        let manifest = examples().join("greeter-provider/sidecar.toml");
        let sidecar = AxleProcess::spawn(
            sidecar_command(&[
                "--app",
                &format!("http://{}", app.addr),
                "--manifest",
                manifest.to_str().unwrap(),
                "--registry",
                registry,
            ]),
            "local on ",
        );
        let registered = sidecar.line_starting("registered ", Duration::from_secs(30));
        assert!(
            registered.is_some(),
            "the provider's sidecar never registered"
        );
        PythonProvider { app, sidecar }
    }

    /// The port the Python app answers `served_by` with.
    fn port(&self) -> String {
        self.app.addr.rsplit(':').next().unwrap().to_string()
    }
}

fn sidecar_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(axle_host_tests::axle_bin());
    cmd.arg("sidecar").args(args);
    cmd
}

fn tools_or_skip(test: &str) -> bool {
    for tool in ["python3", "node"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "{tool} is missing under CI"
            );
            eprintln!("{test}: skipped, {tool} is not installed");
            return false;
        }
    }
    true
}

#[test]
fn node_calls_python_through_two_sidecars_and_survives_a_provider_killed_under_load() {
    let test = "node_calls_python_through_two_sidecars";
    let Some(etcd) = Etcd::start_or_skip(test) else {
        return;
    };
    if !tools_or_skip(test) {
        return;
    }
    let registry = etcd.url();
    let mut a = PythonProvider::start(&registry);
    let b = PythonProvider::start(&registry);
    let caller_manifest = examples().join("greeter-caller/sidecar.toml");
    let caller_sidecar = AxleProcess::spawn(
        sidecar_command(&[
            "--manifest",
            caller_manifest.to_str().unwrap(),
            "--registry",
            &registry,
        ]),
        "local on ",
    );
    let local = caller_sidecar.addr.clone();

    // The local listener answers the application directly too (and is not external).
    let answered = wait_until(Duration::from_secs(10), || {
        post(&local, "/greeter/hello", &[], r#"{"name": "rust"}"#).status == 200
    });
    assert!(
        answered.is_some(),
        "the caller's sidecar never reached greeter"
    );
    let a_bad = post(&local, "/greeter/hello", &[], "{}");
    assert_eq!(
        a_bad.status, 422,
        "the app's 422 is a business error: {a_bad:?}"
    );
    assert_eq!(a_bad.error_class(), "business");

    let mut node = Command::new("node");
    node.arg(examples().join("greeter-caller/caller.js")).args([
        "--sidecar",
        &format!("http://{local}"),
        "--seconds",
        "6",
        "--concurrency",
        "4",
    ]);
    let node = AxleProcess::spawn(node, "ok ");
    // Under load: kill provider A (app and sidecar, SIGKILL: a crash).
    assert!(
        node.line_starting("ok 300", Duration::from_secs(20))
            .is_some(),
        "node made no progress"
    );
    a.app.kill_9();
    a.sidecar.kill_9();
    let summary = node
        .line_starting("{", Duration::from_secs(30))
        .expect("node's summary line");
    let summary: serde_json::Value =
        serde_json::from_str(&format!("{{{summary}")).expect("summary JSON");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(summary["ok"].as_u64().unwrap() > 300, "{summary}");
    let served_by = summary["served_by"].as_object().unwrap();
    assert!(
        served_by.contains_key(&a.port()) && served_by.contains_key(&b.port()),
        "both providers served: {summary}"
    );
    drop(b);
}
