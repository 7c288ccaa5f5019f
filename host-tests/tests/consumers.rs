//! Consumers register on etcd while they follow a service (issue 21): a real `axle
//! gateway` following `echo` through a real etcd appears in `axle consumers echo`, with
//! its application and pid, and disappears as soon as it stops (SIGTERM deregisters; no
//! wait for the lease). A hostile entry under the consumers prefix is listed as skipped
//! with its reason, never shown as a consumer. The provider's own `axle stats --admin`
//! (and its `GET /stats`) list the consumers of the services it serves.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axle_host_tests::etcd::{wait_until, Etcd, Provider};
use axle_host_tests::{admin_stats, axle_bin, rt};

/// `axle consumers echo --registry URL --json`, parsed.
fn consumers(etcd: &Etcd) -> serde_json::Value {
    let out = Command::new(axle_bin())
        .args(["consumers", "echo", "--registry", &etcd.url(), "--json"])
        .output()
        .expect("run axle consumers");
    assert!(
        out.status.success(),
        "axle consumers: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("axle consumers --json prints JSON")
}

/// Whether `axle consumers echo` lists a consumer with this pid and application.
fn listed(etcd: &Etcd, pid: u32, app: &str) -> bool {
    consumers(etcd)["consumers"]
        .as_array()
        .expect("a consumers array")
        .iter()
        .any(|c| c["pid"] == pid && c["application"] == app)
}

/// An `axle gateway` following the registry, started and listening; killed when dropped.
struct Gateway(Child);

impl Gateway {
    fn start(registry: &str, app: &str) -> Gateway {
        let mut child = Command::new(axle_bin())
            .args(["gateway", "--listen", "127.0.0.1:0", "--registry", registry])
            .args(["--consumer-app", app])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start axle gateway");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the gateway's first line");
        let gateway = Gateway(child);
        assert!(line.starts_with("listening on "), "gateway: {line:?}");
        gateway
    }

    /// SIGTERM, then the exit status (waits up to 10 s).
    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let mut status = None;
        wait_until(Duration::from_secs(10), || {
            status = self.0.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_following_gateway_is_listed_as_a_consumer_until_it_stops() {
    let Some(etcd) = Etcd::start_or_skip("a_following_gateway_is_listed_...") else {
        return;
    };
    let _provider = Provider::start(&etcd.url(), &[]);
    let mut gateway = Gateway::start(&etcd.url(), "web-shop");
    let pid = gateway.0.id();
    wait_until(Duration::from_secs(5), || listed(&etcd, pid, "web-shop"))
        .expect("the gateway is listed as a consumer of echo");
    let listing = consumers(&etcd);
    assert_eq!(listing["namespace"], "default");
    assert_eq!(listing["group"], "default");
    let me = listing["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .unwrap()
        .clone();
    assert_eq!(me["address"], "127.0.0.1", "{me}");

    // The text form names it too.
    let text = Command::new(axle_bin())
        .args(["consumers", "echo", "--registry", &etcd.url()])
        .output()
        .expect("run axle consumers");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("web-shop") && text.contains(&pid.to_string()),
        "{text}"
    );

    let status = gateway.terminate().expect("the gateway exits on SIGTERM");
    assert!(status.success(), "gateway exit: {status:?}");
    // Deregistered on the way out: gone at once, well inside the 10 s lease.
    let gone = wait_until(Duration::from_secs(3), || !listed(&etcd, pid, "web-shop"))
        .expect("the stopped gateway is no longer listed");
    eprintln!("gone {gone:?} after the gateway exited");
}

#[test]
fn hostile_consumer_entries_are_listed_as_skipped_never_shown() {
    let Some(etcd) = Etcd::start_or_skip("hostile_consumer_entries_...") else {
        return;
    };
    let rt = rt();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.client_url()], None)
            .await
            .expect("raw etcd client");
        let prefix = "/axle/default/consumers/echo/default/";
        c.put(format!("{prefix}bad-json"), "{nope", None)
            .await
            .expect("put");
        let escape =
            r#"{"id":"esc","application":"a\u001b[2J","address":"127.0.0.1","pid":1,"start_ms":1}"#;
        c.put(format!("{prefix}esc"), escape, None)
            .await
            .expect("put");
        let good =
            r#"{"id":"good","application":"billing","address":"10.0.0.7","pid":7,"start_ms":1}"#;
        c.put(format!("{prefix}good"), good, None)
            .await
            .expect("put");
    });
    let listing = consumers(&etcd);
    let shown = listing["consumers"].as_array().unwrap();
    assert_eq!(shown.len(), 1, "{listing}");
    assert_eq!(shown[0]["application"], "billing");
    let skipped: Vec<String> = listing["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].contains("not a consumer's JSON"), "{skipped:?}");
    assert!(skipped[1].contains("application"), "{skipped:?}");
    assert!(!skipped[1].contains('\u{1b}'), "{skipped:?}");
}

/// The consumers of `service` in a provider's `stats` answer.
fn consumers_in_stats(stats: &serde_json::Value, service: &str) -> Vec<serde_json::Value> {
    stats["consumers"]
        .as_array()
        .expect("a consumers array in stats")
        .iter()
        .find(|c| c["service"] == service)
        .unwrap_or_else(|| panic!("no consumers entry for {service}: {stats}"))["consumers"]
        .as_array()
        .expect("its consumers")
        .clone()
}

#[test]
fn a_provider_lists_the_consumers_of_its_services_in_its_stats() {
    let Some(etcd) = Etcd::start_or_skip("a_provider_lists_the_consumers_...") else {
        return;
    };
    let provider = Provider::start(&etcd.url(), &["--admin", "127.0.0.1:0"]);
    let admin = provider
        .admin
        .clone()
        .expect("the provider's admin address");
    // Nobody follows yet: each served service is listed, with no consumer and no error.
    let before = admin_stats(&admin);
    for service in ["echo", "flaky", "kv"] {
        assert!(consumers_in_stats(&before, service).is_empty(), "{before}");
    }
    assert!(before["consumers"][0].get("error").is_none(), "{before}");

    let gateway = Gateway::start(&etcd.url(), "web-shop");
    let pid = gateway.0.id();
    wait_until(Duration::from_secs(5), || {
        consumers_in_stats(&admin_stats(&admin), "echo")
            .iter()
            .any(|c| c["pid"] == pid && c["application"] == "web-shop")
    })
    .expect("the provider's stats list the gateway as a consumer of echo");

    // The table says it too, under the service it calls.
    let text = Command::new(axle_bin())
        .args(["stats", "--admin", &admin])
        .output()
        .expect("run axle stats");
    let text = String::from_utf8_lossy(&text.stdout);
    let section = text
        .split("consumers of echo")
        .nth(1)
        .unwrap_or_else(|| panic!("no consumers section for echo:\n{text}"));
    assert!(
        section.contains("web-shop") && section.contains(&pid.to_string()),
        "{text}"
    );

    // Over HTTP, on the same port: the same listing.
    let answer = axle_host_tests::http::request(&admin, "GET", "/stats", &[], b"")
        .expect("GET /stats on the admin port");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let over_http: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert!(consumers_in_stats(&over_http, "echo")
        .iter()
        .any(|c| c["pid"] == pid));
}
