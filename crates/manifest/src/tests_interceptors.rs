//! The interceptor kind in a manifest: its entry keys and its two chain slots.

use super::*;

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, "test.toml", Path::new("/srv/axle"))
}

const TWO: &str = "[plugins.a]\nkind = \"interceptor\"\ncomponent = \"a.wasm\"\n\
                   [plugins.b]\nkind = \"interceptor\"\ncomponent = \"b.wasm\"\non-error = \"refuse\"\ngrant-payload = true\n";

#[test]
fn interceptor_entries_take_on_error_pass_or_refuse_and_the_payload_grant() {
    let m = parse(TWO).unwrap();
    let (a, b) = (&m.plugins["a"], &m.plugins["b"]);
    assert_eq!(a.kind, PluginKind::Interceptor);
    assert!(
        a.on_error_admit && !a.grant_payload,
        "defaults: pass, no payload"
    );
    assert!(!b.on_error_admit && b.grant_payload);
}

#[test]
fn chains_keep_manifest_order_and_services_override_them() {
    let text = format!(
        "{TWO}[slots]\nclient-interceptors = [\"b\", \"a\"]\nserver-interceptors = [\"a\"]\n\
         [services.kv.slots]\nserver-interceptors = [\"b\", \"a\"]\n\
         [services.off.slots]\nclient-interceptors = []\n"
    );
    let m = parse(&text).unwrap();
    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(m.slots_for("echo").client_interceptors, names(&["b", "a"]));
    assert_eq!(m.slots_for("echo").server_interceptors, names(&["a"]));
    assert_eq!(m.slots_for("kv").server_interceptors, names(&["b", "a"]));
    assert_eq!(m.slots_for("kv").client_interceptors, names(&["b", "a"]));
    assert_eq!(m.slots_for("off").client_interceptors, names(&[]));
}

#[test]
fn bad_interceptor_keys_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[plugins.i]\nkind = \"interceptor\"\ncomponent = \"a.wasm\"\non-error = \"admit\"\n", "plugins.i.on-error", "\"pass\" or \"refuse\""),
        ("[plugins.l]\nkind = \"limiter\"\ncomponent = \"a.wasm\"\non-error = \"pass\"\n", "plugins.l.on-error", "\"admit\" or \"reject\""),
        ("[plugins.r]\nkind = \"router\"\ncomponent = \"a.wasm\"\ngrant-payload = true\n", "plugins.r.grant-payload", "only interceptors"),
        ("[plugins.r]\nkind = \"router\"\ncomponent = \"a.wasm\"\n[slots]\nclient-interceptors = [\"r\"]\n", "slots.client-interceptors", "`r` is a router, this slot takes a interceptor"),
        ("[services.kv.slots]\nserver-interceptors = [\"nope\"]\n", "services.kv.slots.server-interceptors", "no plugin named `nope`"),
    ];
    for (text, key, reason) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!(e.key, *key, "{text}: {e}");
        assert!(e.reason.contains(reason), "{text}: {e}");
    }
    let twice = format!("{TWO}[slots]\nserver-interceptors = [\"a\", \"b\", \"a\"]\n");
    let e = parse(&twice).unwrap_err();
    assert_eq!(e.key, "slots.server-interceptors");
    assert!(e.reason.contains("named twice"), "{e}");
}
