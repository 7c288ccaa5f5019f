//! The wire protocol (`docs/wire.md`): frames, their metadata, error classes, and the codec
//! that cuts a byte stream into frames with bounded buffers.

mod codec;
mod compression;
mod content_type;
mod error_class;
mod frame;
mod metadata;
mod text_fields;

pub use bytestring::ByteString;
pub use codec::{encode_into as codec_encode, FrameCodec, Limits, WireError, HEADER_LEN};
pub use compression::{decompress, Compression, Encoding, MAX_RATIO};
pub use content_type::ContentType;
pub use error_class::ErrorClass;
pub use frame::{Frame, Kind, FLAG_EXTERNAL};
pub use metadata::Metadata;
pub use text_fields::TextFields;

/// The protocol version this kernel speaks.
pub const VERSION: u8 = 1;

/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = [0xA5, 0x1E];
