//! The serializer slot. Safe default: none — a failed encode or decode is an error to the
//! caller (there is no safe guess at bytes).

use std::time::Duration;

use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;
use axle_wire::ContentType;

pub use axle_spi::{Node, Value};

crate::kinds::world_kind!(
    SerializerKind,
    serializer,
    Serializer,
    SerializerPre,
    "serializer world"
);

/// Why a payload could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SerializeError {
    /// The plugin refused the input (its message says why).
    #[error("{0}")]
    Rejected(String),
    /// The plugin failed (trap, timeout, memory).
    #[error("serializer failed: {0}")]
    Fault(#[from] Fault),
}

/// A loaded serializer.
pub struct SerializerPlugin {
    pool: Pool<Instance<SerializerKind>>,
    content_type: ContentType,
    /// How long a call waits for a dead instance's replacement (the plugin's
    /// `timeout-ms`): a serializer has no safe default but an error.
    replacement_wait: Duration,
}

impl SerializerPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    pub(crate) fn new(mut instances: Vec<Instance<SerializerKind>>) -> Result<Self, Fault> {
        let content_type = instances[0].call("content-type", |b, s| b.call_content_type(s))?;
        if content_type.is_empty() || content_type.len() > 255 {
            return Err(Fault::Invalid(format!(
                "content type must be 1..=255 bytes, got {content_type:?}"
            )));
        }
        let owner = instances[0].pool_owner();
        Ok(SerializerPlugin {
            replacement_wait: Duration::from_millis(owner.timeout_ms),
            pool: Pool::new(instances, owner),
            content_type: ContentType::intern(&content_type),
        })
    }

    /// The content type the plugin declared at load (interned: frames naming it are read
    /// without allocating).
    pub fn content_type(&self) -> &ContentType {
        &self.content_type
    }

    /// Value → bytes.
    pub fn encode(&self, value: &Value) -> Result<Vec<u8>, SerializeError> {
        let value = crate::convert::value_in(value);
        self.pool.with(|inst| {
            inst.ensure_within(0, self.replacement_wait, |_, _| Ok(()))?;
            inst.call("encode", |b, s| b.call_encode(s, &value))?
                .map_err(SerializeError::Rejected)
        })?
    }

    /// Bytes → value.
    pub fn decode(&self, bytes: &[u8]) -> Result<Value, SerializeError> {
        self.pool.with(|inst| {
            inst.ensure_within(0, self.replacement_wait, |_, _| Ok(()))?;
            inst.call("decode", |b, s| b.call_decode(s, bytes))?
                .map(crate::convert::value_out)
                .map_err(SerializeError::Rejected)
        })?
    }
}
