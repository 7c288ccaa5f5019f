//! Request ids, deduplication and retryable business errors through real `axle serve`
//! processes: a repeated `kv/put` runs once and is answered from the provider's memory; a
//! `no-such-key` business error is retried on another provider when the method lists it.

use std::path::Path;
use std::time::{Duration, Instant};

use axle::client::{CallError, CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::transport::connection::Connection;
use axle::transport::Keepalive;
use axle::wire::{ErrorClass, Limits, Metadata};
use axle_host_tests::{admin_stats, rt, ServeProcess};
use bytes::Bytes;

fn put(key: &str, value: i64) -> Bytes {
    Bytes::from(serde_json::json!({ "key": key, "value": value }).to_string())
}

fn meta(method: &str, request_id: [u8; 16]) -> Metadata {
    Metadata {
        service: Some("kv".into()),
        method: Some(method.into()),
        content_type: Some("application/json".into()),
        deadline_us: Some(5_000_000),
        request_id: Some(request_id),
        ..Metadata::default()
    }
}

/// `puts` in a `kv/put` answer: how many puts the provider has applied in all.
fn puts(answer: &[u8]) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(answer).expect("a JSON answer");
    v["puts"].as_u64().expect("puts")
}

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_repeated_put_runs_once_and_is_answered_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(
        dir.path(),
        "[services.kv.methods.put]\ndedup-ttl-ms = 60000\n",
    );
    let provider = ServeProcess::start_with_manifest(Some(&manifest), &["--admin", "127.0.0.1:0"]);
    let rt = rt();
    rt.block_on(async {
        let conn = Connection::connect(
            &provider.addr,
            Limits::default(),
            Keepalive::default(),
            None,
        )
        .await
        .unwrap();
        let soon = || Instant::now() + Duration::from_secs(5);
        let first = conn
            .call(0, meta("put", [1; 16]), put("k", 1), soon())
            .await
            .unwrap();
        // The same request id again (a caller's retry after a lost answer), even with
        // another body: the first answer, the handler not run.
        let repeat = conn
            .call(0, meta("put", [1; 16]), put("k", 2), soon())
            .await
            .unwrap();
        assert_eq!(first.meta.error_class, None);
        assert_eq!(repeat.payload, first.payload, "the stored answer");
        assert_eq!(puts(&first.payload), 1);
        // Another request id is another call: it runs.
        let other = conn
            .call(0, meta("put", [2; 16]), put("k", 3), soon())
            .await
            .unwrap();
        assert_eq!(puts(&other.payload), 2, "ran once per request id");
        // `get` does not deduplicate: the same id runs each time.
        for _ in 0..2 {
            let got = conn
                .call(
                    0,
                    meta("get", [1; 16]),
                    Bytes::from(r#"{"key":"k"}"#),
                    soon(),
                )
                .await
                .unwrap();
            assert_eq!(got.meta.error_class, None);
        }
    });
    let stats = admin_stats(provider.admin.as_deref().unwrap());
    let methods = stats["servers"][0]["methods"].as_array().expect("methods");
    let method = |name: &str| {
        methods
            .iter()
            .find(|m| m["method"] == name)
            .unwrap_or_else(|| panic!("{name} in {methods:?}"))
            .clone()
    };
    let (put, get) = (method("put"), method("get"));
    assert_eq!(put["requests"], 3);
    assert_eq!(put["handled"], 2, "the repeat never reached the handler");
    assert_eq!(put["repeats_answered"], 1);
    assert_eq!(get["handled"], 2);
    assert_eq!(get["repeats_answered"], 0);
}

/// A client of `kv` at `endpoints` with `governance` on `kv/get` (method tier) and a
/// retry budget as large as the calls.
fn kv_client(host: &PluginHost, endpoints: &[&ServeProcess], governance: &str) -> Client {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let layer: axle::governance::TierSettings = toml::from_str(governance).unwrap();
    layer.validate().unwrap();
    m.method_governance
        .insert(("kv".into(), "get".into()), layer);
    // Every call may need its retry: the budget (a share of the calls) must not be what
    // the test measures.
    m.governance.retry_budget_ratio = Some(1.0);
    let specs: Vec<EndpointSpec> = endpoints
        .iter()
        .map(|p| EndpointSpec::new(&p.addr))
        .collect();
    Client::new(host, ClientConfig::new(m).endpoints("kv", specs)).unwrap()
}

#[test]
fn a_listed_business_code_is_retried_on_another_provider() {
    // Two replicas; only the first has the key (the other has not caught up).
    let (a, b) = (ServeProcess::start(&[]), ServeProcess::start(&[]));
    let cache = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(cache.path().to_path_buf())).unwrap();
    let rt = rt();
    rt.block_on(async {
        let only_a = kv_client(&host, &[&a], "");
        let body = serde_json::json!({ "key": "k", "value": 1 });
        only_a
            .call::<_, serde_json::Value>("kv", "put", &body, &CallOptions::default())
            .await
            .unwrap();
        let get = serde_json::json!({ "key": "k" });
        let calls = 40;
        let run = |client: Client| {
            let get = get.clone();
            async move {
                let mut missing = 0;
                for _ in 0..calls {
                    match client
                        .call::<_, serde_json::Value>("kv", "get", &get, &CallOptions::default())
                        .await
                    {
                        Ok(v) => assert_eq!(v["value"], 1),
                        Err(CallError::Remote { class, code, .. }) => {
                            assert_eq!(class, ErrorClass::Business);
                            assert_eq!(code.as_deref(), Some("no-such-key"));
                            missing += 1;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                missing
            }
        };
        // Not listed: the replica without the key answers about half the calls.
        let plain = run(kv_client(&host, &[&a, &b], "idempotent = true")).await;
        assert!(plain > 0, "the lagging replica answered some calls");
        // Listed: every call finds the key (retried on the other replica).
        let listed = run(kv_client(
            &host,
            &[&a, &b],
            "idempotent = true\nretry-on-business = [\"no-such-key\"]",
        ))
        .await;
        assert_eq!(listed, 0, "{listed} of {calls} calls missed the key");
    });
}
