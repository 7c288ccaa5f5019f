//! Result caching and the monitoring switch through real `axle serve` processes: a
//! cached `kv/get` reaches the provider once per distinct request, and a provider with
//! `monitor = false` answers every call while its per-method stats stay at zero.

use std::path::Path;

use axle::client::{CallOptions, Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle_host_tests::{admin_stats, rt, ServeProcess};

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The provider's stats of `kv/<method>` (`axle stats` through the admin endpoint); none
/// when nothing was counted for it.
fn method_stats(provider: &ServeProcess, method: &str) -> Option<serde_json::Value> {
    let stats = admin_stats(provider.admin.as_deref().unwrap());
    let methods = stats["servers"][0]["methods"].as_array().expect("methods");
    methods
        .iter()
        .find(|m| m["service"] == "kv" && m["method"] == method)
        .cloned()
}

/// A client of `kv` at `provider`, its manifest read from `text` (so the manifest's
/// checks run).
fn kv_client(host: &PluginHost, dir: &Path, provider: &ServeProcess, text: &str) -> Client {
    let mut m = Manifest::load(&write(dir, text)).unwrap();
    m.endpoints.clear();
    let spec = EndpointSpec::new(&provider.addr);
    Client::new(host, ClientConfig::new(m).endpoints("kv", vec![spec])).unwrap()
}

#[test]
fn a_cached_get_reaches_the_provider_once_per_distinct_request() {
    let provider = ServeProcess::start(&["--admin", "127.0.0.1:0"]);
    let dir = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let client = kv_client(
        &host,
        dir.path(),
        &provider,
        "[services.kv.methods.get]\nidempotent = true\ncache-ttl-ms = 60000\n",
    );
    let rt = rt();
    rt.block_on(async {
        let put = serde_json::json!({ "key": "k", "value": 7 });
        client
            .call::<_, serde_json::Value>("kv", "put", &put, &CallOptions::default())
            .await
            .unwrap();
        for key in ["k", "k", "k", "other", "other"] {
            let get = serde_json::json!({ "key": key });
            let answer = client
                .call::<_, serde_json::Value>("kv", "get", &get, &CallOptions::default())
                .await;
            match key {
                "k" => assert_eq!(answer.unwrap()["value"], 7),
                _ => assert!(answer.is_err(), "no such key"),
            }
        }
    });
    let get = method_stats(&provider, "get").expect("kv/get was counted");
    // "k" once (then twice from the cache); "other" failed, and failures are never kept.
    assert_eq!(get["requests"], 3, "{get}");
    let policy = client.services()[0]
        .policies
        .iter()
        .find(|p| p.method == "get")
        .expect("kv/get is declared")
        .clone();
    assert_eq!(
        (policy.counts.cache_hits, policy.counts.cache_misses),
        (2, 3)
    );
}

#[test]
fn a_cache_on_a_method_that_is_not_idempotent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "[services.kv.methods.put]\ncache-ttl-ms = 60000\n",
    );
    let e = Manifest::load(&path).unwrap_err().to_string();
    assert!(e.contains("services.kv.methods.put.cache-ttl-ms"), "{e}");
    assert!(e.contains("idempotent"), "{e}");
}

#[test]
fn a_provider_with_monitor_off_answers_and_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(dir.path(), "[governance]\nmonitor = false\n");
    let provider = ServeProcess::start_with_manifest(Some(&manifest), &["--admin", "127.0.0.1:0"]);
    let host = PluginHost::new(Some(dir.path().join("cache"))).unwrap();
    let client = kv_client(&host, dir.path(), &provider, "");
    let rt = rt();
    rt.block_on(async {
        for value in 0..3 {
            let put = serde_json::json!({ "key": "k", "value": value });
            client
                .call::<_, serde_json::Value>("kv", "put", &put, &CallOptions::default())
                .await
                .unwrap();
        }
    });
    // Stats with nothing counted are not listed at all.
    let put = method_stats(&provider, "put");
    assert!(
        put.as_ref()
            .is_none_or(|p| p["requests"] == 0 && p["ok"] == 0),
        "{put:?}"
    );
    // The caller monitors (its manifest did not switch it off).
    let calls = client.services()[0]
        .policies
        .iter()
        .map(|p| p.counts.calls)
        .sum::<u64>();
    assert_eq!(calls, 3);
}
