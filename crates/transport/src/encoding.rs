//! Payload compression at the transport's edges (`axle_wire::Compression`): outgoing
//! payloads are compressed towards a peer that accepts the encoding, incoming ones are
//! decompressed, bounded, before anything else sees them. Handlers, plugins and the
//! pipelines only ever see plain payloads.
//!
//! Callers check `Compression::encoding` (outgoing) or `content_encoding` (incoming) first,
//! so a connection without compression pays one branch and allocates nothing.

use axle_wire::{Compression, Frame, WireError};

/// Says which encodings this side accepts and compresses the payload if the peer (which
/// accepts `peer_accepts`) takes it and it is worth it.
pub(crate) fn outgoing(compression: &Compression, frame: &mut Frame, peer_accepts: u8) {
    frame.meta.accept_encoding = compression.accepts();
    if let Some((code, packed)) = compression.compress(&frame.payload, peer_accepts) {
        frame.payload = packed;
        frame.meta.content_encoding = Some(code);
    }
}

/// The frame with its payload plain: decompressed if it came compressed, at most `max`
/// bytes (the frame limit) and within the wire's ratio cap.
pub(crate) fn incoming(frame: &mut Frame, max: usize) -> Result<(), WireError> {
    if let Some(code) = frame.meta.content_encoding.take() {
        frame.payload = axle_wire::decompress(code, &frame.payload, max)?;
    }
    Ok(())
}
