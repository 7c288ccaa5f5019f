//! Compression through real `axle serve` processes, the bytes on the wire counted by a
//! relay between caller and provider: with both sides on, 64 KiB of repeated bytes cross
//! in a fraction of that; with either side off (an older peer is one that never says it
//! accepts an encoding), calls work and every payload crosses plain.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle_host_tests::{rt, ServeProcess};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LZ4: &str = "[governance]\ncompression = \"lz4\"\n";
const SIZE: usize = 64 << 10;
const CALLS: usize = 3;

/// Bytes a relay carried: caller to provider, provider to caller.
#[derive(Default)]
struct Carried {
    up: AtomicU64,
    down: AtomicU64,
}

/// Copies `from` to `to`, counting.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    count: Arc<Carried>,
    up: bool,
) {
    let mut buf = vec![0u8; 16 << 10];
    while let Ok(n) = from.read(&mut buf).await {
        // Counted before it is passed on: whatever the caller has received is counted.
        let counter = if up { &count.up } else { &count.down };
        counter.fetch_add(n as u64, Relaxed);
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A relay on 127.0.0.1 to `target`, counting what it carries.
async fn relay(target: String) -> (String, Arc<Carried>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(Carried::default());
    let carried = count.clone();
    tokio::spawn(async move {
        while let Ok((caller, _)) = listener.accept().await {
            let Ok(provider) = TcpStream::connect(&target).await else {
                return;
            };
            let (cr, cw) = caller.into_split();
            let (pr, pw) = provider.into_split();
            tokio::spawn(pipe(cr, pw, carried.clone(), true));
            tokio::spawn(pipe(pr, cw, carried.clone(), false));
        }
    });
    (addr, count)
}

fn manifest(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Calls `echo` through a relay, from a caller configured by `caller`, to a provider
/// configured by `provider`; what the relay carried.
fn echo_through_relay(caller: &str, provider: &str) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let serving = manifest(dir.path(), "provider.toml", provider);
    let process = ServeProcess::start_with_manifest(Some(&serving), &[]);
    let calling = Manifest::load(&manifest(dir.path(), "caller.toml", caller)).unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let body = Bytes::from(
        b"axle "
            .iter()
            .copied()
            .cycle()
            .take(SIZE)
            .collect::<Vec<u8>>(),
    );
    let rt = rt();
    rt.block_on(async {
        let (addr, carried) = relay(process.addr.clone()).await;
        let mut m = calling;
        m.endpoints.clear();
        let config = ClientConfig::new(m).endpoints("echo", vec![EndpointSpec::new(&addr)]);
        let client = Client::new(&host, config).unwrap();
        for _ in 0..CALLS {
            let reply = client
                .call_raw("echo", "say", body.clone(), &CallOptions::default())
                .await
                .unwrap();
            assert_eq!(reply.payload, body, "the caller sees the plain answer");
        }
        (carried.up.load(Relaxed), carried.down.load(Relaxed))
    })
}

#[test]
fn both_sides_on_the_payloads_shrink_on_the_wire() {
    let (up, down) = echo_through_relay(LZ4, LZ4);
    let plain = (CALLS * SIZE) as u64;
    // Answers: every one compressed (the request said the caller accepts lz4).
    assert!(
        down < plain / 10,
        "{down} bytes down for {plain} of answers"
    );
    // Requests: the first goes before the provider said it accepts lz4, then compressed.
    assert!(up < SIZE as u64 + plain / 10, "{up} bytes up");
}

#[test]
fn a_provider_without_compression_gets_and_sends_plain_payloads() {
    let (up, down) = echo_through_relay(LZ4, "");
    let plain = (CALLS * SIZE) as u64;
    assert!(up >= plain && down >= plain, "{up} up, {down} down");
}

#[test]
fn a_caller_without_compression_gets_plain_answers() {
    let (up, down) = echo_through_relay("", LZ4);
    let plain = (CALLS * SIZE) as u64;
    assert!(up >= plain && down >= plain, "{up} up, {down} down");
}
