//! Cuts a byte stream into frames and back (tokio-util `Decoder`/`Encoder`).
//!
//! Buffers are bounded: the header is checked against the limits before any body byte is
//! awaited, so a peer cannot make us reserve more than one max-size frame. Any violation is
//! a [`WireError`], and the connection that produced it is closed by its owner.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::{Frame, Kind, Metadata, MAGIC, VERSION};

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 22;

/// The largest frame limit there can be: every length on the wire is 32 bits, and the
/// whole frame is held to one as well, so no length can wrap or be cut (on any target).
pub const MAX_FRAME_LIMIT: usize = u32::MAX as usize;

/// Size limits of one side of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest whole frame (header + metadata + payload).
    pub max_frame: usize,
    /// Largest metadata section.
    pub max_metadata: usize,
    /// Payload compression (off by default): what this side sends compressed, when the
    /// peer accepts it, and advertises it accepts.
    pub compression: crate::Compression,
}

impl Limits {
    /// Limits with the given largest frame, refused above [`MAX_FRAME_LIMIT`] or below
    /// what a header and the metadata limit need.
    pub fn with_max_frame(self, max_frame: usize) -> Result<Limits, String> {
        if max_frame > MAX_FRAME_LIMIT {
            return Err(format!(
                "the frame limit can be at most {MAX_FRAME_LIMIT} bytes (its lengths are 32 bits), got {max_frame}"
            ));
        }
        if max_frame < HEADER_LEN + 1024 {
            return Err(format!(
                "the frame limit must be at least {} bytes, got {max_frame}",
                HEADER_LEN + 1024
            ));
        }
        Ok(Limits { max_frame, ..self })
    }

    /// The frame limit in force: never above what the length fields hold, whatever a
    /// caller put in the field.
    fn frame_limit(&self) -> usize {
        self.max_frame.min(MAX_FRAME_LIMIT)
    }
}

/// `HEADER_LEN + meta + payload`, or `None` if it does not fit a `usize`.
fn frame_total(meta_len: usize, payload_len: usize) -> Option<usize> {
    HEADER_LEN.checked_add(meta_len)?.checked_add(payload_len)
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame: 16 << 20,
            max_metadata: 64 << 10,
            compression: crate::Compression::default(),
        }
    }
}

/// What can go wrong on the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("not an Axle peer (bad magic {0:02x?})")]
    BadMagic([u8; 2]),
    #[error("unsupported protocol version {0} (this peer speaks {VERSION})")]
    Version(u8),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame of {size} bytes exceeds the limit of {limit}")]
    FrameTooLarge { size: usize, limit: usize },
    #[error("metadata of {size} bytes exceeds the limit of {limit}")]
    MetadataTooLarge { size: usize, limit: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// The frame codec.
#[derive(Clone, Debug, Default)]
pub struct FrameCodec {
    limits: Limits,
}

impl FrameCodec {
    pub fn new(limits: Limits) -> Self {
        FrameCodec { limits }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, WireError> {
        if src.len() < HEADER_LEN {
            src.reserve(HEADER_LEN - src.len());
            return Ok(None);
        }
        let mut h = &src[..HEADER_LEN];
        let magic = [h.get_u8(), h.get_u8()];
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = h.get_u8();
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let code = h.get_u8();
        let kind = Kind::from_code(code).ok_or(WireError::UnknownKind(code))?;
        let flags = h.get_u16();
        let id = h.get_u64();
        let meta_len = h.get_u32() as usize;
        let payload_len = h.get_u32() as usize;
        if meta_len > self.limits.max_metadata {
            return Err(WireError::MetadataTooLarge {
                size: meta_len,
                limit: self.limits.max_metadata,
            });
        }
        let limit = self.limits.frame_limit();
        let total = match frame_total(meta_len, payload_len) {
            Some(total) if total <= limit => total,
            other => {
                return Err(WireError::FrameTooLarge {
                    size: other.unwrap_or(usize::MAX),
                    limit,
                })
            }
        };
        if src.len() < total {
            src.reserve(total - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(total).freeze();
        frame.advance(HEADER_LEN);
        let meta = Metadata::decode(&frame.split_to(meta_len))?;
        Ok(Some(Frame {
            kind,
            flags,
            id,
            meta,
            payload: frame,
        }))
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = WireError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), WireError> {
        encode_into(&self.limits, &frame, dst)
    }
}

/// Encodes `frame` at the end of `dst`; on error `dst` is left as it was, so no partial
/// frame is ever written.
pub fn encode_into(limits: &Limits, frame: &Frame, dst: &mut BytesMut) -> Result<(), WireError> {
    let start = dst.len();
    dst.reserve(HEADER_LEN + 64 + frame.payload.len());
    dst.put_slice(&MAGIC);
    dst.put_u8(VERSION);
    dst.put_u8(frame.kind as u8);
    dst.put_u16(frame.flags);
    dst.put_u64(frame.id);
    dst.put_u32(0); // metadata length, patched below
    dst.put_u32(0); // payload length, patched below
    let meta_start = dst.len();
    if let Err(e) = frame.meta.encode(dst) {
        dst.truncate(start);
        return Err(e);
    }
    let meta_len = dst.len() - meta_start;
    let limit = limits.frame_limit();
    let total = frame_total(meta_len, frame.payload.len());
    let check = if meta_len > limits.max_metadata {
        Err(WireError::MetadataTooLarge {
            size: meta_len,
            limit: limits.max_metadata,
        })
    } else if total.is_none_or(|t| t > limit) {
        // The limit is at most u32::MAX, so both lengths below fit their fields.
        Err(WireError::FrameTooLarge {
            size: total.unwrap_or(usize::MAX),
            limit,
        })
    } else {
        Ok(())
    };
    if let Err(e) = check {
        dst.truncate(start);
        return Err(e);
    }
    dst[start + 14..start + 18].copy_from_slice(&(meta_len as u32).to_be_bytes());
    dst[start + 18..start + 22].copy_from_slice(&(frame.payload.len() as u32).to_be_bytes());
    dst.put_slice(&frame.payload);
    Ok(())
}

#[cfg(test)]
mod tests;
