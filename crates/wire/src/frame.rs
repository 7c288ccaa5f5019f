//! A frame: header fields, metadata, payload.

use bytes::Bytes;

use super::{ContentType, ErrorClass, Metadata};

/// Flag bit 0: the request comes from outside the trust boundary.
pub const FLAG_EXTERNAL: u16 = 1;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request = 1,
    Response = 2,
    Ping = 3,
    Pong = 4,
    Goaway = 5,
    Cancel = 6,
}

impl Kind {
    /// The kind with wire code `code`.
    pub fn from_code(code: u8) -> Option<Kind> {
        [
            Kind::Request,
            Kind::Response,
            Kind::Ping,
            Kind::Pong,
            Kind::Goaway,
            Kind::Cancel,
        ]
        .into_iter()
        .find(|k| *k as u8 == code)
    }
}

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub flags: u16,
    pub id: u64,
    pub meta: Metadata,
    pub payload: Bytes,
}

impl Frame {
    /// A request frame.
    pub fn request(id: u64, meta: Metadata, payload: Bytes) -> Frame {
        Frame {
            kind: Kind::Request,
            flags: 0,
            id,
            meta,
            payload,
        }
    }

    /// A successful response.
    pub fn response(id: u64, content_type: Option<ContentType>, payload: Bytes) -> Frame {
        Frame {
            kind: Kind::Response,
            flags: 0,
            id,
            meta: Metadata {
                content_type,
                ..Metadata::default()
            },
            payload,
        }
    }

    /// An error response.
    pub fn error(id: u64, class: ErrorClass, message: impl Into<String>) -> Frame {
        Frame {
            kind: Kind::Response,
            flags: 0,
            id,
            meta: Metadata {
                error_class: Some(class),
                error_message: Some(message.into()),
                ..Metadata::default()
            },
            payload: Bytes::new(),
        }
    }

    /// A frame with no metadata and no payload (ping, pong, cancel).
    pub fn bare(kind: Kind, id: u64) -> Frame {
        Frame {
            kind,
            flags: 0,
            id,
            meta: Metadata::default(),
            payload: Bytes::new(),
        }
    }

    /// A goaway frame, with a reason.
    pub fn goaway(reason: impl Into<String>) -> Frame {
        Frame {
            kind: Kind::Goaway,
            flags: 0,
            id: 0,
            meta: Metadata {
                error_message: Some(reason.into()),
                ..Metadata::default()
            },
            payload: Bytes::new(),
        }
    }
}
