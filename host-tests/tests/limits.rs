//! The provider's transport limits and its stop, with real `axle serve` processes: a flood
//! of idle connections against the connection cap, a stalled frame, and SIGTERM with slow
//! calls in flight.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use axle::client::CallOptions;
use axle::manifest::EndpointSpec;
use axle::plugin::PluginHost;
use axle_host_tests::{drive_echo, governed_client, rt, ServeProcess};

/// The embedded manifest with `keys` added to `[serve]`, in `dir`.
fn manifest_with_serve(dir: &std::path::Path, keys: &str) -> std::path::PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base.replacen("[serve]\n", &format!("[serve]\n{keys}\n"), 1);
    assert_ne!(text, base, "the embedded manifest has a [serve] table");
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Open descriptors of process `pid`.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Whether the provider closes `s` within a bound (reads until end of stream).
fn closed_by_provider(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn ten_thousand_idle_connections_against_a_cap_of_a_thousand() {
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        manifest_with_serve(dir.path(), "max-connections = 1000\nframe-timeout-ms = 300");
    let provider = ServeProcess::start_with_env(
        Some(&manifest),
        &["--admin", "127.0.0.1:0"],
        &[("AXLE_LOG", "error")],
    );
    let addr: std::net::SocketAddr = provider.addr.parse().unwrap();

    // A frame that starts and never finishes is closed after the limit.
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled.write_all(&axle::wire::MAGIC).unwrap();
    assert!(
        closed_by_provider(&mut stalled),
        "a half-sent frame's connection is closed"
    );

    // The flood: as many idle connections as this process may open, up to 10,000.
    let limit = axle::core::descriptors::raise_descriptor_limit().unwrap_or(1024);
    let flood = 10_000.min(limit.saturating_sub(500) as usize);
    assert!(
        flood >= 2_000,
        "descriptor limit {limit} too low for the test"
    );
    let t0 = Instant::now();
    let mut idle = Vec::with_capacity(flood);
    for _ in 0..flood {
        match TcpStream::connect(addr) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect {} failed: {e}", idle.len()),
        }
    }
    eprintln!("connected {flood} in {:?}", t0.elapsed());
    // Normal callers meanwhile: every call answered.
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let client = runtime.block_on(async {
        governed_client(
            &host,
            "echo",
            vec![EndpointSpec::new(provider.addr.clone())],
            "retries = 0",
        )
    });
    let (ok, failed) = drive_echo(&runtime, &client, 16, 50, "flood", |_, _| {
        CallOptions::default()
    });
    assert_eq!((ok, failed), (800, 0), "normal callers see no error");
    eprintln!("drove in {:?}", t0.elapsed());

    // The provider holds at most its cap (plus its own few descriptors).
    let pid = provider.pid();
    let until = Instant::now() + Duration::from_secs(20);
    while descriptors(pid) > 1_100 {
        assert!(
            Instant::now() < until,
            "the provider holds {} descriptors",
            descriptors(pid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats =
        axle_host_tests::admin_stats(provider.admin.as_deref().unwrap())["servers"][0].clone();
    eprintln!(
        "flood of {flood}: provider descriptors {}, stats connections {} evicted {} refused {}",
        descriptors(pid),
        stats["connections"],
        stats["connections_evicted"],
        stats["connections_refused"]
    );
    assert!(
        stats["connections"].as_u64().unwrap() <= 1_000 + 16,
        "{stats}"
    );
    assert!(
        stats["connections_evicted"].as_u64().unwrap() >= (flood - 1_000) as u64,
        "{stats}"
    );
    drop(idle);
}

#[test]
fn sigterm_with_slow_calls_in_flight_answers_or_refuses_each() {
    let mut provider = ServeProcess::start_with_env(
        None,
        &["--flaky-latency-ms", "400", "--drain-ms", "5000"],
        &[("AXLE_LOG", "error")],
    );
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    let (ok, refused, other) = runtime.block_on(async {
        let client = governed_client(
            &host,
            "flaky",
            vec![EndpointSpec::new(provider.addr.clone())],
            "retries = 0\nbreaker = false\ntimeout-ms = 20000",
        );
        let calls: Vec<_> = (0..200)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .call_raw(
                            "flaky",
                            "work",
                            bytes::Bytes::from(format!("{i}")),
                            &CallOptions::default(),
                        )
                        .await
                })
            })
            .collect();
        // All 200 on the wire, then the stop.
        let until = Instant::now() + Duration::from_secs(20);
        while client.endpoints().iter().map(|e| e.in_flight).sum::<u32>() < 200 {
            assert!(Instant::now() < until, "the calls never all left");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        provider.terminate();
        let (mut ok, mut refused, mut other) = (0u64, 0u64, Vec::new());
        for c in calls {
            match c.await.unwrap() {
                Ok(_) => ok += 1,
                Err(e) if e.class() == "shutting_down" => refused += 1,
                Err(e) => other.push(e.to_string()),
            }
        }
        (ok, refused, other)
    });
    let status = provider
        .wait_exit(Duration::from_secs(30))
        .expect("the provider exits after its drain");
    assert!(status.success(), "{status:?}");
    let summary = provider.rest_of_stdout();
    eprintln!("caller: {ok} answered, {refused} refused, {other:?}; provider: {summary}");
    assert!(
        other.is_empty(),
        "calls neither answered nor refused: {other:?}"
    );
    assert_eq!(ok + refused, 200);
    let handled: u64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("stopped: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `stopped:` line in {summary:?}"));
    assert_eq!(handled, ok, "every execution's answer reached its caller");
}

#[test]
fn a_sigterm_right_after_start_is_a_graceful_stop() {
    // The stop signal is listened for before the provider binds: one that comes while it
    // starts (or registers) is neither lost nor fatal.
    for _ in 0..3 {
        let mut provider = ServeProcess::start(&[]);
        provider.terminate();
        let status = provider
            .wait_exit(Duration::from_secs(10))
            .expect("exits after a SIGTERM sent at once");
        assert!(status.success(), "a graceful exit: {status:?}");
        assert!(provider.rest_of_stdout().contains("stopped: 0 handled"));
    }
}
