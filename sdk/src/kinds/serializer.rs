//! Serializers turn values into bytes and back.

use crate::{Config, Value};

/// A payload format. Implement this and call [`crate::export_serializer!`].
///
/// With the `packed-serializer` feature the kernel calls [`Serializer::encode_packed`]
/// and [`Serializer::decode_packed`] instead: the value crosses the boundary packed
/// ([`crate::packed`]), and a format that reads and writes it as it goes
/// ([`crate::packed::Reader`], [`crate::packed::Writer`]) builds no tree and borrows
/// every string. Their defaults go through `encode` and `decode`, so overriding them is
/// only for speed.
pub trait Serializer: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;
    /// The content type written into frames.
    fn content_type(&self) -> String;
    /// Value → bytes.
    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String>;
    /// Bytes → value.
    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String>;

    /// Packed value → bytes.
    fn encode_packed(&mut self, value: &[u8]) -> Result<Vec<u8>, String> {
        self.encode(&Value::unpack(value)?)
    }

    /// Bytes → packed value.
    fn decode_packed(&mut self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        self.decode(bytes)?.pack()
    }
}

/// An empty buffer of at least `capacity` bytes to write an `encode_packed` or
/// `decode_packed` answer into. In a `packed-serializer` component it is the buffer of
/// the answer before last, which the host has copied out by then, so a call in steady
/// state allocates nothing for its answer; elsewhere (natively, or without the feature)
/// a new one. Either way the caller owns it and returns it as the answer.
pub fn answer_buffer(capacity: usize) -> Vec<u8> {
    #[cfg(all(target_arch = "wasm32", feature = "packed-serializer"))]
    {
        crate::wasm::packed_exports::spare(capacity)
    }
    #[cfg(not(all(target_arch = "wasm32", feature = "packed-serializer")))]
    {
        Vec::with_capacity(capacity)
    }
}
