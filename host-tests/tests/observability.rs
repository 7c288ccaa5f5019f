//! Observability from the outside (issue 16): real `axle serve --admin` and `axle demo
//! --admin` processes on loopback, read over HTTP on the admin port (metrics, stats,
//! health, readiness, plugins, a token-guarded swap) and over the frame protocol on the
//! same port (`axle stats --admin`); their logs on a pipe (no colour codes, JSON lines).

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axle::manifest::EndpointSpec;
use axle_host_tests::{admin_stats, axle_bin, client_for, drive_echo, rt, ServeProcess};

const WAIT: Duration = Duration::from_secs(30);

/// One HTTP/1.1 exchange on a fresh connection: (status, body).
fn http(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the admin port");
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read the answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    (status.expect("a status code"), body.to_string())
}

fn get(addr: &str, path: &str) -> (u16, String) {
    http(addr, "GET", path, &[], "")
}

/// `GET /readyz`'s status, or `None` once the port is gone: a stopping process may close
/// it between the connect and the answer (a reset), which is what is being waited for.
fn readiness_or_gone(addr: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(WAIT)).ok()?;
    write!(
        s,
        "GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    raw.split(' ').nth(1)?.parse().ok()
}

/// Every sample of a Prometheus text scrape, `name{labels}` → value; fails the test on
/// a line that is neither a comment nor `name{labels} value`.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                comment.starts_with("HELP ") || comment.starts_with("TYPE "),
                "{line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name in {line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "labels closed in {line}");
        }
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
        };
        out.insert(series.to_string(), value);
    }
    out
}

/// The sum of the samples named `name` whose labels include every one of `labels`.
fn sum(samples: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| {
            series.split('{').next() == Some(name) && labels.iter().all(|l| series.contains(l))
        })
        .map(|(_, v)| v)
        .sum()
}

/// Polls `f` until it is true (fails the test after [`WAIT`]).
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn echo_calls(addr: &str, calls: u64) {
    let host = axle_host_tests::TestHost::new();
    let client = client_for(
        &host.host,
        "echo",
        "round-robin",
        vec![EndpointSpec::new(addr)],
    );
    let (ok, failed) = drive_echo(&rt(), &client, 1, calls, "echo", |_, _| Default::default());
    assert_eq!((ok, failed), (calls, 0));
}

#[test]
fn a_provider_answers_metrics_stats_health_and_readiness_over_http_and_frames() {
    let p = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let admin = p.admin.clone().expect("admin address");
    assert_eq!(get(&admin, "/healthz").0, 200);
    wait_for("/readyz to answer 200", || get(&admin, "/readyz").0 == 200);

    const CALLS: u64 = 25;
    echo_calls(&p.addr, CALLS);

    let (status, text) = get(&admin, "/metrics");
    assert_eq!(status, 200);
    let m = samples(&text);
    let echo = ["server=\"serve\"", "service=\"echo\""];
    assert_eq!(
        sum(&m, "axle_server_requests_total", &echo),
        CALLS as f64,
        "{text}"
    );
    assert_eq!(sum(&m, "axle_server_ok_total", &echo), CALLS as f64);
    assert_eq!(
        sum(&m, "axle_server_handler_seconds_count", &echo),
        CALLS as f64
    );
    let inf = ["service=\"echo\"", "le=\"+Inf\""];
    assert_eq!(
        sum(&m, "axle_server_handler_seconds_bucket", &inf),
        CALLS as f64
    );
    assert_eq!(
        sum(&m, "axle_server_limiter_admitted_total", &echo),
        CALLS as f64
    );
    assert_eq!(sum(&m, "axle_server_errors_total", &echo), 0.0);
    assert!(text.contains("# TYPE axle_server_handler_seconds histogram"));
    // The token bucket leases (`acquire-lease`): asked at least once, not once a call.
    assert!(
        sum(&m, "axle_plugin_calls_total", &["plugin=\"token-bucket\""]) >= 1.0,
        "the limiter's calls: {text}"
    );

    // `/stats` is the `stats` method `axle stats --admin` reads over frames, same port.
    let (status, body) = get(&admin, "/stats");
    assert_eq!(status, 200);
    let over_http: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let over_frames = admin_stats(&admin);
    let requests = |v: &serde_json::Value| -> u64 {
        v["servers"][0]["methods"]
            .as_array()
            .expect("methods")
            .iter()
            .filter(|m| m["service"] == "echo")
            .map(|m| m["requests"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(requests(&over_http), CALLS);
    assert_eq!(requests(&over_frames), CALLS);
    assert_eq!(over_http["servers"][0]["address"], p.addr.as_str());

    let (status, body) = get(&admin, "/nowhere");
    assert_eq!(status, 404);
    assert!(
        body.contains("/metrics"),
        "the 404 lists the routes: {body}"
    );
    // A request line that is not HTTP gets a refusal, never a hang or a crash.
    let mut s = TcpStream::connect(&admin).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"BROKEN\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    assert_eq!(get(&admin, "/healthz").0, 200, "still serving");

    // Stopping: not ready any more (or already gone).
    p.terminate();
    wait_for("/readyz to stop answering 200", || {
        readiness_or_gone(&admin).is_none_or(|status| status == 503)
    });
}

#[test]
fn swaps_over_http_need_the_token_and_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    let extra = "\n[plugins.strict]\nkind = \"limiter\"\ncomponent = \"builtin:token-bucket\"\n\
                 [plugins.strict.config]\nrate = 100\nburst = 10\n";
    let text = format!("{}{extra}", axle::manifest::defaults::EMBEDDED_MANIFEST);
    std::fs::write(&manifest, text).unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token_arg = token_file.to_str().unwrap();
    let p = ServeProcess::start_with_manifest(
        Some(&manifest),
        &["--admin", "127.0.0.1:0", "--admin-token-file", token_arg],
    );
    let admin = p.admin.clone().expect("admin address");
    let body = r#"{"slot": "limiter", "plugin": "strict"}"#;
    let limiters = || -> Vec<String> {
        let (status, body) = get(&admin, "/plugins");
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let names = v["servers"]["serve"]
            .as_array()
            .expect("the server's plugins");
        names
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(limiters().contains(&"token-bucket".to_string()));

    let (status, answer) = http(&admin, "POST", "/swap", &[], body);
    assert_eq!(status, 401, "{answer}");
    let wrong = ["Authorization: Bearer guess"];
    assert_eq!(http(&admin, "POST", "/swap", &wrong, body).0, 403);
    assert!(
        !limiters().contains(&"strict".to_string()),
        "nothing swapped yet"
    );

    let right = ["Authorization: Bearer s3cret-token"];
    let (status, answer) = http(&admin, "POST", "/swap", &right, body);
    assert_eq!(status, 200, "{answer}");
    let report: serde_json::Value = serde_json::from_str(&answer).expect("the swap's report");
    assert_eq!(report["loaded"], serde_json::json!(["strict"]));
    let now = limiters();
    assert!(now.contains(&"strict".to_string()), "{now:?}");
    assert!(!now.contains(&"token-bucket".to_string()), "{now:?}");

    // A plugin the manifest does not declare: the method's own refusal, as HTTP 400.
    let unknown = r#"{"slot": "limiter", "plugin": "nope"}"#;
    let (status, answer) = http(&admin, "POST", "/swap", &right, unknown);
    assert_eq!(status, 400, "{answer}");
}

#[test]
fn without_a_token_http_swaps_are_refused_and_say_how_to_configure_one() {
    let p = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let admin = p.admin.clone().expect("admin address");
    let body = r#"{"slot": "limiter", "plugin": "token-bucket"}"#;
    let (status, answer) = http(&admin, "POST", "/swap", &["Authorization: Bearer x"], body);
    assert_eq!(status, 403);
    assert!(answer.contains("--admin-token-file"), "{answer}");
    assert!(answer.contains("AXLE_ADMIN_TOKEN"), "{answer}");
}

#[test]
fn a_demo_exposes_its_clients_calls_retries_and_endpoints() {
    let mut child = Command::new(axle_bin())
        .args(["demo", "--admin", "127.0.0.1:0", "--seconds", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start axle demo");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let admin = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "demo ended before its admin line"
        );
        if let Some(rest) = line.strip_prefix("admin on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    wait_for("the demo's client to have called", || {
        let m = samples(&get(&admin, "/metrics").1);
        sum(&m, "axle_client_calls_total", &["client=\"demo\""]) > 0.0
    });
    let (_, text) = get(&admin, "/metrics");
    let m = samples(&text);
    let demo = ["client=\"demo\""];
    assert!(
        sum(&m, "axle_client_call_seconds_count", &demo) > 0.0,
        "{text}"
    );
    for family in [
        "axle_client_retries_total",
        "axle_client_failovers_total",
        "axle_client_hedges_total",
        "axle_client_retry_budget_refused_total",
        "axle_client_breaker_state",
        "axle_client_endpoint_health",
        "axle_client_endpoint_in_flight",
        "axle_server_connections",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} in {text}"
        );
    }
    // One health state per endpoint is current.
    let endpoints = sum(&m, "axle_client_endpoint_in_rotation", &demo)
        + sum(&m, "axle_client_endpoint_health", &["state=\"dead\""])
        + sum(&m, "axle_client_endpoint_health", &["state=\"removed\""]);
    assert!(endpoints >= 1.0, "{text}");
    assert_eq!(get(&admin, "/readyz").0, 200);
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs `axle serve -v ARGS` with stderr on a pipe until its start lines, stops it, and
/// returns what it logged.
fn serve_logs(args: &[&str]) -> String {
    let mut child = Command::new(axle_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "-v",
        ])
        .args(args)
        .env_remove("AXLE_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start axle serve");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    for prefix in ["listening on ", "admin on "] {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with(prefix), "{line:?}");
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    let _ = child.wait();
    logs
}

#[test]
fn logs_on_a_pipe_have_no_colour_and_json_lines_parse() {
    let text = serve_logs(&[]);
    assert!(
        text.contains("admin endpoint listening"),
        "-v logs info: {text}"
    );
    assert!(!text.contains("\x1b["), "no ANSI codes on a pipe: {text:?}");

    let json = serve_logs(&["--log-format", "json"]);
    let lines: Vec<&str> = json.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
    assert!(json.contains("admin endpoint listening"));
}
