//! The serializer plugin on the way out (request) and in (response). Raw payloads never
//! get here.

use bytes::Bytes;

use crate::state::{ClientState, ServiceState};
use crate::{CallError, Reply};
use axle_plugin_host::kinds::serializer::Value;
use axle_wire::ContentType;

/// Encodes a request value with the service's serializer; returns the bytes and their
/// content type.
pub fn encode(svc: &ServiceState, value: &Value) -> Result<(Bytes, ContentType), CallError> {
    let current = svc.read();
    let serializer = current
        .policies
        .slots()
        .serializer
        .as_ref()
        .ok_or_else(|| {
            CallError::Encode(format!(
                "service `{}` has no serializer: set [slots] serializer, or call with raw bytes",
                svc.name
            ))
        })?;
    let bytes = serializer
        .encode(value)
        .map_err(|e| CallError::Encode(e.to_string()))?;
    Ok((Bytes::from(bytes), serializer.content_type().clone()))
}

/// Decodes a response with the serializer of its content type.
pub fn decode(state: &ClientState, reply: &Reply) -> Result<Value, CallError> {
    let loadout = state.loadout.load();
    let serializer = loadout
        .serializers
        .get(reply.content_type.as_str())
        .ok_or_else(|| {
            CallError::Decode(format!(
                "no serializer for content type `{}`",
                reply.content_type
            ))
        })?;
    serializer
        .decode(&reply.payload)
        .map_err(|e| CallError::Decode(e.to_string()))
}
