use crate::kinds::serializer::Serializer;

#[cfg(not(feature = "packed-serializer"))]
world_bindings!(
    "axle:spi/serializer",
    "__axle_export_serializer",
    "axle_sdk::wasm::serializer::bindings"
);

// The same kind, also taking and giving values packed (`encode-packed`,
// `decode-packed`): those two are written by hand, without a post-return
// (`packed_exports.rs`), and exported by `export_serializer!`.
#[cfg(feature = "packed-serializer")]
world_bindings!(
    "axle:spi/packed-serializer",
    "__axle_export_serializer",
    "axle_sdk::wasm::serializer::bindings",
    ["encode-packed", "decode-packed"]
);

use crate::wasm::base::axle::spi::types as wit;
use bindings::axle::spi::values;

pub trait Slot {
    type Plugin: Serializer;
    fn with<R>(f: impl FnOnce(&mut Option<Self::Plugin>) -> R) -> R;
}

pub(crate) const NOT_INITIALISED: &str = "serializer used before init";

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let plugin = S::Plugin::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(plugin));
        Ok(())
    }

    fn content_type() -> String {
        S::with(|slot| slot.as_ref().map(|p| p.content_type()).unwrap_or_default())
    }

    fn encode(value: values::Value) -> Result<Vec<u8>, String> {
        let value = crate::Value {
            nodes: value.nodes.into_iter().map(node_in).collect(),
        };
        S::with(|slot| match slot {
            Some(p) => p.encode(&value),
            None => Err(NOT_INITIALISED.to_string()),
        })
    }

    fn decode(bytes: Vec<u8>) -> Result<values::Value, String> {
        let value = S::with(|slot| match slot {
            Some(p) => p.decode(&bytes),
            None => Err(NOT_INITIALISED.to_string()),
        })?;
        Ok(values::Value {
            nodes: value.nodes.into_iter().map(node_out).collect(),
        })
    }
}

fn node_in(n: values::Node) -> crate::Node {
    use crate::Node as N;
    match n {
        values::Node::Null => N::Null,
        values::Node::Boolean(b) => N::Boolean(b),
        values::Node::Signed(i) => N::Signed(i),
        values::Node::Unsigned(u) => N::Unsigned(u),
        values::Node::Float(f) => N::Float(f),
        values::Node::Text(s) => N::Text(s),
        values::Node::Binary(b) => N::Binary(b),
        values::Node::Array(n) => N::Array(n),
        values::Node::Mapping(n) => N::Mapping(n),
    }
}

fn node_out(n: crate::Node) -> values::Node {
    use values::Node as N;
    match n {
        crate::Node::Null => N::Null,
        crate::Node::Boolean(b) => N::Boolean(b),
        crate::Node::Signed(i) => N::Signed(i),
        crate::Node::Unsigned(u) => N::Unsigned(u),
        crate::Node::Float(f) => N::Float(f),
        crate::Node::Text(s) => N::Text(s),
        crate::Node::Binary(b) => N::Binary(b),
        crate::Node::Array(n) => N::Array(n),
        crate::Node::Mapping(n) => N::Mapping(n),
    }
}
