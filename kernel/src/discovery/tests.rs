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
    let mut i = Instance::new("127.0.0.1:7300");
    i.zone = Some("z1".into());
    i.version = Some("1.2".into());
    i.tags.insert("lane".into(), "canary".into());
    assert_eq!(Instance::decode(&i.encode()).unwrap(), i);
    let spec = i.endpoint_spec();
    assert!(spec.tags.contains(&("zone".into(), "z1".into())));
    assert!(spec.tags.contains(&("lane".into(), "canary".into())));
    assert!(Instance::decode(b"not json").is_err());
    assert!(Instance::decode(br#"{"address":"nohost"}"#).is_err());
    let minimal = Instance::decode(br#"{"address":"h:1"}"#).unwrap();
    assert_eq!((minimal.weight, minimal.start_ms), (100, None));
}

#[test]
fn the_static_list_groups_by_tag() {
    use crate::manifest::EndpointSpec;
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

#[test]
fn discovery_config_validates_with_keys() {
    let parse =
        |text: &str| crate::manifest::Manifest::parse(text, "t.toml", std::path::Path::new("."));
    let m = parse("[discovery]\nregistry = \"etcd://127.0.0.1:2379\"\ngroup = \"blue\"\nsecondary-group = \"green\"\n[services.kv.discovery]\ngroup = \"kv-a\"\n").unwrap();
    assert_eq!(
        m.discovery.registry,
        RegistryUrl::Etcd(vec!["127.0.0.1:2379".into()])
    );
    assert_eq!(m.discovery.groups_for("echo").primary, "blue");
    let kv = m.discovery.groups_for("kv");
    assert_eq!(
        (kv.primary.as_str(), kv.secondary.as_deref()),
        ("kv-a", Some("green"))
    );
    for (text, key) in [
        ("[discovery]\nregistry = \"etcd:/x\"", "discovery.registry"),
        ("[discovery]\ngroup = \"a b\"", "discovery.group"),
        ("[discovery]\nlease-ttl-s = 0", "discovery.lease-ttl-s"),
        ("[discovery]\nbogus = 1", "discovery"),
        (
            "[services.x.discovery]\nsecondary-group = \"\"",
            "services.x.discovery.secondary-group",
        ),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.key.starts_with(key), "{text}: {e}");
    }
}
