//! One loopback echo call of 1 KiB, at concurrency 1: Axle's full pipeline with the
//! default manifest's wasm plugins, beside the bare framing and connection (no pipeline).
//! `axle bench rpc` adds concurrency 64 and tonic.

use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::server::ServerBuilder;
use axle::transport::connection::Connection;
use axle::transport::Keepalive;
use axle::wire::{Limits, Metadata};
use axle_bench::rpc::{start_raw_server, PAYLOAD_BYTES};
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};

fn echo(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cache = tempfile::tempdir().expect("temp dir");
    let host = PluginHost::new(Some(cache.path().to_path_buf())).expect("plugin host");
    let mut manifest = Manifest::embedded().expect("manifest");
    manifest.endpoints.clear();
    let body = Bytes::from(vec![0x5a; PAYLOAD_BYTES]);

    let (client, server) = rt.block_on(async {
        let server = ServerBuilder::new()
            .with_manifest(&host, &manifest)
            .expect("server plugins");
        let server = axle::services::echo::register(server)
            .bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = server.local_addr().to_string();
        let client = Client::new(
            &host,
            ClientConfig::new(manifest.clone()).endpoints("echo", [EndpointSpec::new(addr)]),
        )
        .expect("client");
        (client, server)
    });
    c.bench_function("echo-1KiB/axle", |b| {
        b.iter(|| {
            rt.block_on(client.call_raw("echo", "echo", body.clone(), &CallOptions::default()))
                .expect("echo")
        })
    });

    let conn = rt.block_on(async {
        let (addr, _task) = start_raw_server().await.expect("raw server");
        Connection::connect(
            &addr.to_string(),
            Limits::default(),
            Keepalive::default(),
            None,
        )
        .await
        .expect("connect")
    });
    c.bench_function("echo-1KiB/raw", |b| {
        b.iter(|| {
            let meta = Metadata {
                service: Some("echo".into()),
                method: Some("echo".into()),
                ..Metadata::default()
            };
            rt.block_on(conn.call(
                0,
                meta,
                body.clone(),
                Instant::now() + Duration::from_secs(5),
            ))
            .expect("echo")
        })
    });
    rt.block_on(server.shutdown(Duration::from_millis(100)));
}

criterion_group!(benches, echo);
criterion_main!(benches);
