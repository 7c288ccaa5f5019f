//! The packed form on the boundary (the `packed-serializer` world): the bytes the kernel
//! hands `encode-packed` follow the layout `docs/authoring.md` documents byte for byte, a
//! packed answer is read back into the same value, and a serializer writes the same
//! bytes whichever form the value crossed in. Through the real host, with the hostile
//! serializer fixture told to echo what it is given.

use axle::plugin::kinds::serializer::{Node, SerializerPlugin, Value};
use axle::plugin::{LoadedPlugin, Plugin};
use axle_host_tests::{built_component, manifest, TestHost};

fn serializer(p: &LoadedPlugin) -> &SerializerPlugin {
    match &p.plugin {
        Plugin::Serializer(s) => s,
        _ => panic!("{} is not a serializer", p.name),
    }
}

fn load(t: &TestHost, component: &str, config: &str) -> LoadedPlugin {
    let extra = format!("[plugins.s.config]\n{config}");
    t.load(&manifest("s", "serializer", component, &extra), "s")
        .unwrap()
}

/// The hostile serializer `krate`, behaving (with `config` beside).
fn fixture(t: &TestHost, krate: &str, config: &str) -> LoadedPlugin {
    let config = format!("behaviour = \"none\"\n{config}");
    load(t, built_component(krate).to_str().unwrap(), &config)
}

/// `{"id": -2, "b": [null, true, <07>, 1.5, 18446744073709551615]}`.
fn sample() -> Value {
    Value {
        nodes: vec![
            Node::Mapping(2),
            Node::Text("id".into()),
            Node::Signed(-2),
            Node::Text("b".into()),
            Node::Array(5),
            Node::Null,
            Node::Boolean(true),
            Node::Binary(vec![7]),
            Node::Float(1.5),
            Node::Unsigned(u64::MAX),
        ],
    }
}

/// `sample()` packed, written out from the documented table.
fn sample_packed() -> Vec<u8> {
    let mut b = vec![9, 2, 0, 0, 0]; // mapping of 2
    b.extend([6, 2, 0, 0, 0, b'i', b'd']); // text "id"
    b.push(3);
    b.extend((-2i64).to_le_bytes()); // signed
    b.extend([6, 1, 0, 0, 0, b'b']); // text "b"
    b.extend([8, 5, 0, 0, 0]); // array of 5
    b.extend([0, 2]); // null, true
    b.extend([7, 1, 0, 0, 0, 7]); // binary <07>
    b.push(5);
    b.extend(1.5f64.to_bits().to_le_bytes()); // float
    b.push(4);
    b.extend(u64::MAX.to_le_bytes()); // unsigned
    b
}

#[test]
fn the_kernel_hands_encode_packed_the_documented_layout() {
    let t = TestHost::new();
    let p = fixture(
        &t,
        "axle_fixture_hostile_packed_serializer",
        "packed = \"echo\"",
    );
    let sent = serializer(&p).encode(&sample()).unwrap();
    assert_eq!(sent, sample_packed());
}

#[test]
fn a_packed_answer_is_read_back_into_the_value() {
    let t = TestHost::new();
    let p = fixture(
        &t,
        "axle_fixture_hostile_packed_serializer",
        "packed = \"echo\"",
    );
    assert_eq!(serializer(&p).decode(&sample_packed()).unwrap(), sample());
    // One byte short: refused as the plugin's broken answer, and counted.
    let cut = sample_packed();
    let err = serializer(&p).decode(&cut[..cut.len() - 1]).unwrap_err();
    assert!(err.to_string().contains("decode-packed"), "{err}");
    assert_eq!(serializer(&p).counters().stats.invalid, 1);
}

#[test]
fn both_forms_give_the_same_bytes() {
    let t = TestHost::new();
    // The same JSON conversion, reached through node lists and through packed values.
    let nodes = fixture(&t, "axle_fixture_hostile_serializer", "");
    let packed = load(&t, "builtin:json", "");
    let (nodes, packed) = (serializer(&nodes), serializer(&packed));
    let json = nodes.encode(&sample()).unwrap();
    assert_eq!(packed.encode(&sample()).unwrap(), json);
    assert_eq!(
        String::from_utf8(json.clone()).unwrap(),
        r#"{"id":-2,"b":[null,true,[7],1.5,18446744073709551615]}"#
    );
    assert_eq!(packed.decode(&json).unwrap(), nodes.decode(&json).unwrap());
}

/// A component whose packed exports have a post-return, as a generated export in any
/// language has, that overwrites the answer once it has run (an allocator freeing it
/// writes there too): the kernel reads every answer before the post-return runs. Read
/// after it, as the kernel read a kept answer, every byte here is `0xAA`.
#[test]
fn an_answer_is_read_before_the_post_return_may_overwrite_it() {
    let t = TestHost::new();
    let echo = fixture(&t, "axle_fixture_packed_post_return", "packed = \"echo\"");
    let echo = serializer(&echo);
    let json = fixture(&t, "axle_fixture_packed_post_return", "");
    let json = serializer(&json);
    let shipped = load(&t, "builtin:json", "");
    let shipped = serializer(&shipped);
    for _ in 0..3 {
        assert_eq!(echo.encode(&sample()).unwrap(), sample_packed());
        assert_eq!(echo.decode(&sample_packed()).unwrap(), sample());
        let text = json.encode(&sample()).unwrap();
        assert_eq!(
            String::from_utf8(text.clone()).unwrap(),
            r#"{"id":-2,"b":[null,true,[7],1.5,18446744073709551615]}"#
        );
        // JSON has no bytes: `<07>` comes back as `[7]`, as from the shipped `json`.
        assert_eq!(json.decode(&text).unwrap(), shipped.decode(&text).unwrap());
    }
    assert_eq!(
        echo.counters().stats.invalid + json.counters().stats.invalid,
        0
    );
}
