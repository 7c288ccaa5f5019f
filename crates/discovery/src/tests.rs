use std::path::Path;
use std::time::Duration;

use super::*;

#[test]
fn registry_urls_parse_or_say_why_not() {
    assert_eq!(RegistryUrl::parse("static").unwrap(), RegistryUrl::Static);
    assert_eq!(
        RegistryUrl::parse("etcd://127.0.0.1:23791").unwrap(),
        RegistryUrl::Etcd(vec!["127.0.0.1:23791".into()])
    );
    assert_eq!(
        RegistryUrl::parse("etcd://a:1,b:2/").unwrap(),
        RegistryUrl::Etcd(vec!["a:1".into(), "b:2".into()])
    );
    assert_eq!(
        RegistryUrl::parse("file:///tmp/p.toml").unwrap(),
        RegistryUrl::File("/tmp/p.toml".into())
    );
    for bad in [
        "",
        "etcd://",
        "etcd://127.0.0.1",
        "etcd://127.0.0.1:99999",
        "etcd://:2379",
        "etcd://h:1/ns",
        "http://127.0.0.1:2379",
        "file:",
        "consul://x:1",
    ] {
        let e = RegistryUrl::parse(bad).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("registry `{}`", bad.trim())),
            "{bad}: {e}"
        );
    }
}

#[test]
fn key_parts_are_checked() {
    assert!(ServiceKey::new("prod", "echo", "blue-1").is_ok());
    for (ns, s, g) in [
        ("", "e", "g"),
        ("p", "a/b", "g"),
        ("p", "e", "g h"),
        ("p", "e", ""),
    ] {
        assert!(ServiceKey::new(ns, s, g).is_err(), "{ns}/{s}/{g}");
    }
}

#[test]
fn warmup_ramps_linearly_and_never_starves() {
    let w = Duration::from_secs(10);
    assert_eq!(warmup_permille(None, w, 5_000), 1000, "no start time: full");
    assert_eq!(warmup_permille(Some(1_000), Duration::ZERO, 1_000), 1000);
    assert_eq!(
        warmup_permille(Some(1_000), w, 1_000),
        1,
        "just started: not zero"
    );
    assert_eq!(warmup_permille(Some(1_000), w, 3_500), 250);
    assert_eq!(warmup_permille(Some(1_000), w, 6_000), 500);
    assert_eq!(warmup_permille(Some(1_000), w, 11_000), 1000);
    assert_eq!(
        warmup_permille(Some(9_000), w, 1_000),
        1,
        "clock skew: just started"
    );
}

#[test]
fn instances_round_trip_and_bad_values_are_errors() {
    let mut i = Provider::new("127.0.0.1:7300");
    i.zone = Some("z1".into());
    i.version = Some("1.2".into());
    i.tags.insert("lane".into(), "canary".into());
    assert_eq!(Provider::decode(&i.encode()).unwrap(), i);
    let spec = i.endpoint_spec();
    assert!(spec.tags.contains(&("zone".into(), "z1".into())));
    assert!(spec.tags.contains(&("lane".into(), "canary".into())));
    assert!(Provider::decode(b"not json").is_err());
    assert!(Provider::decode(br#"{"address":"nohost"}"#).is_err());
    let minimal = Provider::decode(br#"{"address":"h:1"}"#).unwrap();
    assert_eq!((minimal.weight, minimal.start_ms), (100, None));
}

#[test]
fn the_static_list_groups_by_tag() {
    use crate::EndpointSpec;
    let mut blue = EndpointSpec::new("127.0.0.1:2");
    blue.tags.push(("group".into(), "blue".into()));
    let lists = [(
        "echo".to_string(),
        vec![EndpointSpec::new("127.0.0.1:1"), blue],
    )]
    .into_iter()
    .collect();
    let key = |g| ServiceKey::new("default", "echo", g).unwrap();
    let addrs = |g| {
        static_list::select(&lists, &key(g))
            .into_iter()
            .map(|i| i.address)
            .collect::<Vec<_>>()
    };
    assert_eq!(addrs("default"), ["127.0.0.1:1"]);
    assert_eq!(addrs("blue"), ["127.0.0.1:2"]);
    assert!(addrs("green").is_empty());
}

fn snapshot(addrs: &[&str]) -> Listing {
    Listing {
        revision: 1,
        instances: std::sync::Arc::new(addrs.iter().map(|a| Provider::new(*a)).collect()),
        connected: true,
        lists: 1,
        ..Listing::default()
    }
}

#[test]
fn the_secondary_group_serves_only_while_the_primary_has_nothing_admissible() {
    use follow::plan;
    let groups = config::Groups {
        primary: "a".into(),
        secondary: Some("b".into()),
    };
    let addrs = |p: &follow::Plan| {
        p.instances
            .iter()
            .map(|i| i.address.clone())
            .collect::<Vec<_>>()
    };
    let (p, s) = (snapshot(&["h:1", "h:2"]), snapshot(&["h:9"]));
    let all = |a: &[&str]| a.len();
    let none = |_: &[&str]| 0;
    let healthy = plan(&groups, &p, Some(&s), all);
    assert_eq!(
        (healthy.group, addrs(&healthy)),
        ("a", vec!["h:1".to_string(), "h:2".into()])
    );
    // Every primary endpoint inadmissible: the secondary joins, the primary's stay (so
    // health probes can bring them back).
    let sick = plan(&groups, &p, Some(&s), none);
    assert_eq!((sick.group, addrs(&sick).len()), ("b", 3));
    // The primary emptied: the secondary alone.
    let empty = snapshot(&[]);
    let gone = plan(&groups, &empty, Some(&s), all);
    assert_eq!((gone.group, addrs(&gone)), ("b", vec!["h:9".to_string()]));
    // No secondary providers either: the (empty) primary.
    let nothing = plan(&groups, &empty, Some(&empty), all);
    assert_eq!((nothing.group, nothing.instances.len()), ("a", 0));
    // No secondary configured.
    let solo = config::Groups {
        primary: "a".into(),
        secondary: None,
    };
    assert_eq!(plan(&solo, &empty, None, all).group, "a");
}

/// A stand-in for the manifest's parser: every quoted string is an endpoint of `echo`.
fn echo_endpoints(
    text: &str,
    _file: &str,
    _base: &std::path::Path,
) -> Result<std::collections::BTreeMap<String, Vec<EndpointSpec>>, String> {
    let mut list = Vec::new();
    for address in text.split('"').skip(1).step_by(2) {
        axle_core::validate::address(address)?;
        list.push(EndpointSpec::new(address));
    }
    Ok([("echo".to_string(), list)].into_iter().collect())
}

#[tokio::test]
async fn a_watched_file_is_reread_and_a_broken_one_keeps_the_last_good_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.toml");
    std::fs::write(&path, "[services.echo]\nendpoints = [\"127.0.0.1:1\"]\n").unwrap();
    let url = RegistryUrl::parse(&format!("file:{}", path.display())).unwrap();
    let backend = open(
        &url,
        BackendOptions {
            parse_endpoints: echo_endpoints,
            manifest_endpoints: Default::default(),
            lease_ttl: Duration::from_secs(10),
            resync: Duration::from_secs(1),
            file_poll: Duration::from_millis(20),
            etcd: Default::default(),
        },
    )
    .unwrap();
    let key = ServiceKey::new("default", "echo", "default").unwrap();
    assert!(
        backend.register(&key, &Provider::new("h:1")).await.is_err(),
        "read-only"
    );
    let mut rx = backend.subscribe(&key);
    let addrs = |s: &Listing| {
        s.instances
            .iter()
            .map(|i| i.address.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(addrs(&rx.borrow()), ["127.0.0.1:1"]);
    std::fs::write(
        &path,
        "[services.echo]\nendpoints = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n",
    )
    .unwrap();
    let s = tokio::time::timeout(
        Duration::from_secs(5),
        rx.wait_for(|s| s.instances.len() == 2),
    )
    .await
    .expect("change seen")
    .unwrap()
    .clone();
    assert_eq!(s.revision, 2);
    std::fs::write(&path, "[services.echo]\nendpoints = [\"nonsense\"]\n").unwrap();
    let s = tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| !s.connected))
        .await
        .expect("error seen")
        .unwrap()
        .clone();
    assert_eq!(addrs(&s).len(), 2, "the last good list stays");
    assert!(s.error.unwrap().contains("not host:port"));
}

#[test]
fn stale_listings_and_events_are_discarded() {
    use revisions::Tracked;
    let one = |a: &str| [(a.to_string(), Provider::new(a))].into_iter().collect();
    let mut t = Tracked::default();
    assert!(t.listing(10, one("h:1")));
    // An event the listing already contains (revision <= 10): stale.
    assert!(!t.event(9, "h:2".into(), Some(Provider::new("h:2"))));
    assert!(!t.event(10, "h:1".into(), None));
    assert_eq!(t.set.len(), 1);
    assert!(t.event(11, "h:2".into(), Some(Provider::new("h:2"))));
    assert!(t.event(12, "h:1".into(), None));
    assert_eq!(t.set.keys().collect::<Vec<_>>(), ["h:2"]);
    // A slow listing from before those events must not bring h:1 back.
    assert!(!t.listing(11, one("h:1")));
    assert_eq!(t.set.keys().collect::<Vec<_>>(), ["h:2"]);
    // A newer listing is the truth, even where it disagrees (a missed event).
    assert!(t.listing(20, one("h:3")));
    assert_eq!(t.set.keys().collect::<Vec<_>>(), ["h:3"]);
    assert!(!t.event(19, "h:4".into(), Some(Provider::new("h:4"))));
    assert_eq!(t.applied, 20);
}

/// `[discovery]` written as JSON (the same serde tables the manifest reads from TOML).
fn discovery(v: serde_json::Value) -> Result<DiscoveryConfig, (String, String)> {
    let raw: config::RawDiscovery =
        serde_json::from_value(v).map_err(|e| (String::new(), e.to_string()))?;
    DiscoveryConfig::from_raw(raw, &Default::default(), Path::new("/etc/axle"))
}

#[test]
fn the_etcd_table_takes_tls_credentials_and_caps() {
    use config::PasswordSource;
    let d = discovery(serde_json::json!({})).unwrap();
    assert_eq!(d.etcd, EtcdConfig::default());
    assert!(!d.etcd.tls());
    assert_eq!(
        d.etcd.limits.max_instances,
        defaults::MAX_INSTANCES_PER_SERVICE
    );
    let d = discovery(serde_json::json!({ "etcd": {
        "user": "axle",
        "password-file": "etcd.pw",
        "ca-file": "/pki/ca.pem",
        "cert-file": "client.pem",
        "key-file": "client.key",
        "server-name": "etcd.internal",
        "allowed-networks": ["10.0.0.0/8", "fd00::/8"],
        "max-instances": 8,
        "max-value-bytes": 2048,
        "max-tags": 4,
        "max-tag-bytes": 64,
    }}))
    .unwrap()
    .etcd;
    assert!(d.tls());
    assert_eq!(d.user.as_deref(), Some("axle"));
    assert_eq!(
        d.password,
        Some(PasswordSource::File("/etc/axle/etcd.pw".into())),
        "relative to the manifest's folder"
    );
    assert_eq!(d.ca_file.as_deref(), Some(Path::new("/pki/ca.pem")));
    assert_eq!(
        d.cert_file.as_deref(),
        Some(Path::new("/etc/axle/client.pem"))
    );
    assert_eq!(d.server_name.as_deref(), Some("etcd.internal"));
    assert_eq!(d.limits.allowed_networks.len(), 2);
    assert_eq!(
        (
            d.limits.max_instances,
            d.limits.max_value_bytes,
            d.limits.max_tags,
            d.limits.max_tag_bytes
        ),
        (8, 2048, 4, 64)
    );
    let env =
        discovery(serde_json::json!({ "etcd": { "user": "u", "password-env": "AXLE_TEST_PW" } }))
            .unwrap()
            .etcd;
    assert_eq!(
        env.password,
        Some(PasswordSource::Env("AXLE_TEST_PW".into()))
    );
}

#[test]
fn the_etcd_table_refuses_inline_passwords_and_half_settings() {
    let refused = |etcd: serde_json::Value| {
        let (key, why) = discovery(serde_json::json!({ "etcd": etcd })).unwrap_err();
        format!("{key}: {why}")
    };
    let inline = refused(serde_json::json!({ "user": "u", "password": "hunter2" }));
    assert!(
        inline.contains("discovery.etcd.password") && inline.contains("never written"),
        "{inline}"
    );
    assert!(
        !inline.contains("hunter2"),
        "the secret is not echoed: {inline}"
    );
    for (etcd, says) in [
        (
            serde_json::json!({ "user": "u" }),
            "needs password-file or password-env",
        ),
        (serde_json::json!({ "password-file": "p" }), "needs a user"),
        (
            serde_json::json!({ "user": "u", "password-file": "p", "password-env": "V" }),
            "not both",
        ),
        (
            serde_json::json!({ "user": "u", "password-env": "A=B" }),
            "not an environment variable",
        ),
        (
            serde_json::json!({ "user": "", "password-env": "V" }),
            "empty user",
        ),
        (
            serde_json::json!({ "cert-file": "c", "ca-file": "a" }),
            "go together",
        ),
        (
            serde_json::json!({ "cert-file": "c", "key-file": "k" }),
            "needs TLS",
        ),
        (serde_json::json!({ "server-name": "x" }), "needs TLS"),
        (
            serde_json::json!({ "allowed-networks": ["10.0.0.0/33"] }),
            "allowed-networks",
        ),
        (serde_json::json!({ "max-instances": 0 }), "at least 1"),
        (serde_json::json!({ "max-tags": 100000 }), "at most"),
        (serde_json::json!({ "passwd": "x" }), "unknown field"),
    ] {
        let got = refused(etcd.clone());
        assert!(got.contains(says), "{etcd}: {got}");
    }
}

#[test]
fn the_password_is_read_from_its_file_or_variable_when_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "s3cret\n").unwrap();
    let c = EtcdConfig {
        user: Some("u".into()),
        password: Some(config::PasswordSource::File(file.clone())),
        ..EtcdConfig::default()
    };
    assert_eq!(c.read_password().unwrap().as_deref(), Some("s3cret"));
    std::fs::write(&file, "rotated").unwrap();
    assert_eq!(c.read_password().unwrap().as_deref(), Some("rotated"));
    std::fs::write(&file, "\n").unwrap();
    assert!(c.read_password().unwrap_err().contains("empty"));
    std::fs::remove_file(&file).unwrap();
    assert!(c.read_password().unwrap_err().contains("password-file"));
    let missing = EtcdConfig {
        password: Some(config::PasswordSource::Env(
            "AXLE_TEST_SURELY_UNSET_VAR".into(),
        )),
        ..c
    };
    assert!(missing
        .read_password()
        .unwrap_err()
        .contains("AXLE_TEST_SURELY_UNSET_VAR"));
}
