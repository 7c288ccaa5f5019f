//! Serializers turn values into bytes and back.

use crate::{Config, Value};

/// A payload format. Implement this and call [`crate::export_serializer!`].
pub trait Serializer: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;
    /// The content type written into frames.
    fn content_type(&self) -> String;
    /// Value → bytes.
    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String>;
    /// Bytes → value.
    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String>;
}
