//! The trust boundary and TLS, with real processes on loopback: who is external, that the
//! marker survives a hop, mTLS identities, refused certificates and a rotated one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::client::{CallError, CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::server::{Context, ServerBuilder, Status};
use axle::transport::tls::{ClientTlsFiles, ServerTlsFiles};
use axle_host_tests::{rt, ServeProcess, TestPki};

/// The embedded manifest with `kv/put` internal-only, and `extra` appended, in `dir`.
fn manifest(dir: &Path, extra: &str) -> PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base.replace(
        "idempotent = false     #",
        "internal-only = true\nidempotent = false     #",
    );
    assert_ne!(text, base);
    let path = dir.join("plugins.toml");
    std::fs::write(&path, format!("{text}\n{extra}\n")).unwrap();
    path
}

/// A client of `kv` (and `hop`) at `addr`, dialling TLS with `tls` when given.
fn kv_client(host: &PluginHost, addr: &str, tls: Option<ClientTlsFiles>) -> Client {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    m.tls.client = tls;
    Client::new(
        host,
        ClientConfig::new(m)
            .endpoints("kv", [EndpointSpec::new(addr)])
            .endpoints("hop", [EndpointSpec::new(addr)]),
    )
    .unwrap()
}

fn external() -> CallOptions {
    CallOptions {
        external: true,
        ..CallOptions::default()
    }
}

async fn put(client: &Client, options: &CallOptions) -> Result<serde_json::Value, CallError> {
    let req = serde_json::json!({"key": "k", "value": 1});
    client.call("kv", "put", &req, options).await
}

async fn get(client: &Client) -> Result<serde_json::Value, CallError> {
    let req = serde_json::json!({"key": "k"});
    client
        .call("kv", "get", &req, &CallOptions::default())
        .await
}

/// `ok` when the handler ran (a `get` of a key never put answers a business error),
/// else the error class.
fn class(r: Result<serde_json::Value, CallError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) if e.class() == "business" => "ok".into(),
        Err(e) => e.class().to_string(),
    }
}

#[test]
fn a_caller_the_manifest_does_not_trust_is_external_whatever_its_frames_say() {
    let dir = tempfile::tempdir().unwrap();
    let untrusting = ServeProcess::start_with_manifest(Some(&manifest(dir.path(), "")), &[]);
    let trusting = ServeProcess::start_with_manifest(
        Some(&manifest(dir.path(), "")),
        &["--trust", "127.0.0.0/8"],
    );
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let runtime = rt();
    runtime.block_on(async {
        let outsider = kv_client(&host, &untrusting.addr, None);
        // The external bit is clear; the provider does not trust loopback.
        assert_eq!(
            class(put(&outsider, &CallOptions::default()).await),
            "forbidden"
        );
        assert_eq!(
            class(get(&outsider).await),
            "ok",
            "get is not internal-only"
        );

        let insider = kv_client(&host, &trusting.addr, None);
        assert_eq!(class(put(&insider, &CallOptions::default()).await), "ok");
        // A trusted peer's marker is honoured: what it says is external stays so.
        assert_eq!(class(put(&insider, &external()).await), "forbidden");
    });
}

#[test]
fn a_request_the_edge_marked_external_stays_external_across_one_more_hop() {
    let dir = tempfile::tempdir().unwrap();
    let backend = ServeProcess::start_with_manifest(
        Some(&manifest(
            dir.path(),
            "[trust]\ninternal-networks = [\"127.0.0.1\"]",
        )),
        &[],
    );
    let host = Arc::new(PluginHost::new(Some(dir.path().join("cache"))).unwrap());
    let runtime = rt();
    runtime.block_on(async {
        // The middle tier: `hop/put` calls the backend's kv/put on the request's behalf.
        let to_backend = kv_client(&host, &backend.addr, None);
        let mut middle_manifest = Manifest::embedded().unwrap();
        middle_manifest.trust.internal_networks =
            vec![axle::core::network::Network::parse("127.0.0.1").unwrap()];
        let middle = ServerBuilder::new()
            .with_manifest(&host, &middle_manifest)
            .unwrap()
            .typed("hop", "put", move |req: serde_json::Value, ctx: Context| {
                let to_backend = to_backend.clone();
                async move {
                    to_backend
                        .call::<_, serde_json::Value>("kv", "put", &req, &CallOptions::within(&ctx))
                        .await
                        .map_err(|e| Status::business(e.class().to_string()))
                }
            })
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        let edge = kv_client(&host, &middle.local_addr().to_string(), None);
        let hop = |options: CallOptions| {
            let edge = edge.clone();
            async move {
                let req = serde_json::json!({"key": "k", "value": 2});
                edge.call::<_, serde_json::Value>("hop", "put", &req, &options)
                    .await
                    .map_err(|e| e.to_string())
            }
        };
        hop(CallOptions::default())
            .await
            .expect("internal all the way");
        let err = hop(external()).await.unwrap_err();
        assert!(
            err.contains("forbidden"),
            "external at the second hop: {err}"
        );
        middle.shutdown(Duration::from_millis(100)).await;
    });
}

/// A provider in this process serving TLS with `files`, trusting `identities`; its
/// `who/ami` answers the caller's verified identity and whether it was external.
async fn whoami_server(
    host: &PluginHost,
    files: ServerTlsFiles,
    identities: &[&str],
) -> axle::server::Server {
    let mut m = Manifest::embedded().unwrap();
    m.tls.server = Some(files);
    m.trust.identities = identities.iter().map(|s| s.to_string()).collect();
    ServerBuilder::new()
        .with_manifest(host, &m)
        .unwrap()
        .typed(
            "who",
            "ami",
            |_: serde_json::Value, ctx: Context| async move {
                Ok(serde_json::json!({
                    "identity": ctx.peer_identity,
                    "external": ctx.scope.external,
                }))
            },
        )
        .bind("127.0.0.1:0")
        .await
        .unwrap()
}

async fn whoami(
    host: &PluginHost,
    addr: &str,
    tls: ClientTlsFiles,
) -> Result<serde_json::Value, String> {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    m.tls.client = Some(tls);
    let client = Client::new(
        host,
        ClientConfig::new(m).endpoints("who", [EndpointSpec::new(addr)]),
    )
    .unwrap();
    client
        .call(
            "who",
            "ami",
            &serde_json::json!({}),
            &CallOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())
}

#[test]
fn mtls_identities_reach_the_handler_and_strangers_are_refused() {
    let pki = TestPki::new();
    let (cert, key) = pki.issue("provider", "localhost");
    let (orders_cert, orders_key) = pki.issue("orders", "orders.internal");
    let (web_cert, web_key) = pki.issue("web", "web.internal");
    let stranger_pki = TestPki::new();
    let (stranger_cert, stranger_key) = stranger_pki.issue("orders", "orders.internal");
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let caller = |cert: Option<&PathBuf>, key: Option<&PathBuf>| ClientTlsFiles {
        ca: pki.ca.clone(),
        server_name: None,
        cert: cert.cloned(),
        key: key.cloned(),
    };
    rt().block_on(async {
        let files = ServerTlsFiles {
            cert,
            key,
            client_ca: Some(pki.ca.clone()),
        };
        let server = whoami_server(&host, files, &["orders.internal"]).await;
        let addr = format!("localhost:{}", server.local_addr().port());

        let orders = whoami(&host, &addr, caller(Some(&orders_cert), Some(&orders_key)))
            .await
            .expect("a known identity gets through");
        assert_eq!(orders["identity"], "orders.internal");
        assert_eq!(orders["external"], false, "on the allow-list: internal");

        let web = whoami(&host, &addr, caller(Some(&web_cert), Some(&web_key)))
            .await
            .expect("a valid certificate not on the allow-list gets through");
        assert_eq!(web["identity"], "web.internal");
        assert_eq!(web["external"], true, "not on the allow-list: external");

        let none = whoami(&host, &addr, caller(None, None)).await;
        assert!(none.is_err(), "no client certificate: refused: {none:?}");
        let stranger = whoami(
            &host,
            &addr,
            caller(Some(&stranger_cert), Some(&stranger_key)),
        )
        .await;
        assert!(
            stranger.is_err(),
            "a certificate from another CA is refused, whatever name it claims: {stranger:?}"
        );
        server.shutdown(Duration::from_millis(100)).await;
    });
}

#[test]
fn a_rotated_certificate_is_served_without_a_restart() {
    let pki = TestPki::new();
    let (cert, key) = pki.issue("provider", "old.internal");
    let dir = tempfile::tempdir().unwrap();
    let provider = ServeProcess::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let named = |name: &str| ClientTlsFiles {
        ca: pki.ca.clone(),
        server_name: Some(name.into()),
        cert: None,
        key: None,
    };
    rt().block_on(async {
        let old = kv_client(&host, &provider.addr, Some(named("old.internal")));
        assert_eq!(
            class(get(&old).await),
            "ok",
            "TLS with the first certificate"
        );
        // Plain TCP to a TLS provider fails, it is not served in the clear.
        let plain = kv_client(&host, &provider.addr, None);
        assert_ne!(class(get(&plain).await), "ok");

        pki.issue("provider", "new.internal");
        // Each attempt is a fresh client, so a fresh handshake; the provider looks at its
        // files at most once a second.
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let new = kv_client(&host, &provider.addr, Some(named("new.internal")));
            if class(get(&new).await) == "ok" {
                break;
            }
            assert!(
                Instant::now() < until,
                "the new certificate was never served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let stale = kv_client(&host, &provider.addr, Some(named("old.internal")));
        assert_ne!(class(get(&stale).await), "ok", "the old name is gone");
    });
}
