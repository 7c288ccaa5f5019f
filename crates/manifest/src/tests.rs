use super::*;
use std::path::PathBuf;

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, "test.toml", Path::new("/srv/axle"))
}

const RR: &str = "[plugins.rr]\nkind = \"selector\"\ncomponent = \"builtin:round-robin\"\n";

#[test]
fn the_embedded_manifest_is_valid_and_names_every_builtin() {
    let m = Manifest::embedded().unwrap();
    let mut names: Vec<_> = m.plugins.keys().map(String::as_str).collect();
    names.sort();
    let mut builtins = axle_builtins::names();
    builtins.sort();
    assert_eq!(names, builtins);
    assert_eq!(m.slots.selector.as_deref(), Some("smooth-weighted"));
}

#[test]
fn defaults_are_applied_from_one_place() {
    let m = parse(RR).unwrap();
    let p = &m.plugins["rr"];
    assert_eq!(p.timeout_ms, defaults::CALL_TIMEOUT_MS);
    assert_eq!(p.memory_bytes, defaults::MEMORY_MIB << 20);
    assert_eq!(p.instances, 1, "stateful kinds run one instance");
    assert!(p.on_error_admit);
    let s = parse("[plugins.j]\nkind = \"serializer\"\ncomponent = \"builtin:json\"\n").unwrap();
    assert_eq!(
        s.plugins["j"].instances,
        defaults::instances(PluginKind::Serializer)
    );
}

#[test]
fn relative_component_paths_resolve_against_the_manifest() {
    let m = parse("[plugins.x]\nkind = \"router\"\ncomponent = \"plugins/x.wasm\"\n").unwrap();
    assert_eq!(
        m.plugins["x"].component,
        ComponentSource::File(PathBuf::from("/srv/axle/plugins/x.wasm"))
    );
}

#[test]
fn errors_name_file_key_and_reason() {
    let cases: &[(&str, &str, &str)] = &[
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"builtin:nope\"\n", "plugins.rr.component", "no builtin component `nope`"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"\"\n", "plugins.rr.component", "must not be empty"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\ntimeout-ms = 0\n", "plugins.rr.timeout-ms", "must be 1..="),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\nmemory-mib = 100000\n", "plugins.rr.memory-mib", "must be 1..="),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\non-error = \"admit\"\n", "plugins.rr.on-error", "only limiters"),
        ("[plugins.l]\nkind = \"limiter\"\ncomponent = \"a.wasm\"\non-error = \"maybe\"\n", "plugins.l.on-error", "\"admit\" or \"reject\""),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\nkey-on = []\n", "plugins.rr.key-on", "only limiters"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\nquarantine-slow = true\n", "plugins.rr.quarantine-slow", "needs slow-call-us"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\nslow-call-us = 30000\n", "plugins.rr.slow-call-us", "past the call deadline"),
        ("[plugins.l]\nkind = \"limiter\"\ncomponent = \"a.wasm\"\nkey-on = [\"user\"]\n", "plugins.l.key-on", "consumer-ip"),
        ("[plugins.l]\nkind = \"limiter\"\ncomponent = \"a.wasm\"\n[plugins.l.config]\nquotas = [\"billing=5\"]\n", "plugins.l.key-on", "\"consumer-app\""),
        ("[plugins.l]\nkind = \"limiter\"\ncomponent = \"a.wasm\"\nkey-on = [\"consumer-ip\"]\n[plugins.l.config]\nquotas = [\"billing=5\"]\n", "plugins.l.key-on", "quotas"),
        ("[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\ntimeout-ms = \"fast\"\n", "plugins.rr.timeout-ms", "invalid type"),
        ("[slotz]\n", "slotz", "unknown field `slotz`"),
        ("[slots]\nrouters = [\"rr\"]\n[plugins.rr]\nkind = \"selector\"\ncomponent = \"a.wasm\"\n", "slots.routers", "`rr` is a selector, this slot takes a router"),
        ("[services.kv.slots]\nlimiter = \"tb\"\n", "services.kv.slots.limiter", "no plugin named `tb`"),
        ("[plugins.\"a b\"]\nkind = \"selector\"\ncomponent = \"a.wasm\"\n", "plugins.a b", "may hold only ASCII letters"),
        ("x = \n", "(toml)", "not valid TOML"),
        ("[governance]\nselector = \"nope\"\n", "governance.selector", "no plugin named `nope`"),
        ("[plugins.j]\nkind = \"serializer\"\ncomponent = \"a.wasm\"\n[services.kv.methods.get]\nselector = \"j\"\n", "services.kv.methods.get.selector", "not a selector"),
    ];
    for (text, key, reason) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!(e.file, "test.toml");
        assert_eq!(e.key, *key, "{text}: {e}");
        assert!(e.reason.contains(reason), "{text}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("test.toml:{}:", e.at.unwrap().0)),
            "{e}"
        );
        assert!(e.to_string().contains(&format!(": {key}: ")), "{e}");
    }
}

#[test]
fn per_service_slots_override_the_defaults_slot_by_slot() {
    let text = format!(
        "{RR}[plugins.la]\nkind = \"selector\"\ncomponent = \"builtin:least-active\"\n\
         [plugins.tag]\nkind = \"router\"\ncomponent = \"builtin:tag\"\n\
         [slots]\nselector = \"rr\"\nrouters = [\"tag\"]\n[services.kv.slots]\nselector = \"la\"\n"
    );
    let m = parse(&text).unwrap();
    let kv = m.slots_for("kv");
    assert_eq!(kv.selector.as_deref(), Some("la"));
    assert_eq!(kv.routers, Some(vec!["tag".to_string()]), "inherited");
    assert_eq!(m.slots_for("echo").selector.as_deref(), Some("rr"));
}

#[test]
fn discovery_config_validates_with_keys() {
    let parse = |text: &str| crate::Manifest::parse(text, "t.toml", std::path::Path::new("."));
    let m = parse("[discovery]\nregistry = \"etcd://127.0.0.1:2379\"\ngroup = \"blue\"\nsecondary-group = \"green\"\n[services.kv.discovery]\ngroup = \"kv-a\"\n").unwrap();
    assert_eq!(
        m.discovery.registry,
        axle_discovery::RegistryUrl::Etcd(vec!["127.0.0.1:2379".into()])
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

#[test]
fn result_caching_is_per_method_and_needs_an_idempotent_method() {
    let ok = "[services.kv.methods.get]\nidempotent = true\ncache-ttl-ms = 500\n";
    let m = parse(ok).unwrap();
    assert_eq!(m.governance("kv", "get").cache_ttl_ms, 500);
    let inherited = "[services.kv.governance]\nidempotent = true\n\
                     [services.kv.methods.get]\ncache-ttl-ms = 500\n";
    parse(inherited).unwrap();
    for (text, key) in [
        (
            "[services.kv.methods.put]\ncache-ttl-ms = 500\n",
            "services.kv.methods.put.cache-ttl-ms",
        ),
        (
            "[governance]\nidempotent = true\n[services.kv.methods.get]\ncache-ttl-ms = 1\n\
             idempotent = false\n",
            "services.kv.methods.get.cache-ttl-ms",
        ),
        (
            "[governance]\ncache-ttl-ms = 500\nidempotent = true\n",
            "governance.cache-ttl-ms",
        ),
        (
            "[services.kv.governance]\ncache-max-entries = 5\n",
            "services.kv.governance.cache-max-entries",
        ),
    ] {
        let e = parse(text).unwrap_err();
        assert_eq!(e.key, key, "{text}: {e}");
    }
}

#[test]
fn compression_is_global_and_named() {
    let m = parse("[governance]\ncompression = \"lz4\"\ncompression-min-bytes = 64\n").unwrap();
    let c = m.compression();
    assert_eq!(
        (c.encoding, c.min_bytes),
        (Some(axle_wire::Encoding::Lz4), 64)
    );
    assert_eq!(
        parse("").unwrap().compression(),
        axle_wire::Compression::new(None, 1024)
    );
    for (text, key) in [
        (
            "[governance]\ncompression = \"gzip\"\n",
            "governance.compression",
        ),
        (
            "[services.kv.governance]\ncompression = \"lz4\"\n",
            "services.kv.governance.compression",
        ),
        (
            "[services.kv.methods.get]\ncompression-min-bytes = 1\n",
            "services.kv.methods.get.compression-min-bytes",
        ),
    ] {
        let e = parse(text).unwrap_err();
        assert_eq!(e.key, key, "{text}: {e}");
    }
}
