//! Frame metadata: typed fields, encoded as `tag: u8, length: u16, value` (docs/wire.md).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use bytestring::ByteString;

use super::{ContentType, ErrorClass, WireError};

pub(crate) const SERVICE: u8 = 1;
pub(crate) const METHOD: u8 = 2;
const DEADLINE: u8 = 3;
pub(crate) const CONSUMER_APP: u8 = 4;
pub(crate) const TAG: u8 = 5;
pub(crate) const CONTENT_TYPE: u8 = 6;
const TRACE_ID: u8 = 7;
const ERROR_CLASS: u8 = 8;
const ERROR_MESSAGE: u8 = 9;
const RETRY_AFTER: u8 = 10;
const REQUEST_ID: u8 = 11;
const ERROR_CODE: u8 = 12;
const SPAN_ID: u8 = 13;
const CONTENT_ENCODING: u8 = 14;
const ACCEPT_ENCODING: u8 = 15;

/// Everything a frame says besides its payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    /// The names a request is for. A received frame's are slices of the frame itself
    /// (`ByteString`: checked UTF-8 over shared `Bytes`), so reading them allocates
    /// nothing: every request a provider serves carries both.
    pub service: Option<ByteString>,
    pub method: Option<ByteString>,
    /// Microseconds of budget left when the frame was sent.
    pub deadline_us: Option<u64>,
    pub consumer_app: Option<String>,
    pub tags: Vec<(String, String)>,
    pub content_type: Option<ContentType>,
    /// The W3C trace the request belongs to (with `span_id`, a `traceparent`).
    pub trace_id: Option<[u8; 16]>,
    pub error_class: Option<ErrorClass>,
    pub error_message: Option<String>,
    pub retry_after_ms: Option<u32>,
    /// The call this request belongs to: the same for every attempt of one call (its
    /// retries, failovers and hedges), so a provider can tell a repeat from a new call.
    pub request_id: Option<[u8; 16]>,
    /// With `business`: the handler's machine-readable reason (`retry-on-business`).
    pub error_code: Option<String>,
    /// The caller's span (the W3C `parent-id`): encoded, with `trace_flags`, only when
    /// set.
    pub span_id: Option<[u8; 8]>,
    /// W3C trace flags (bit 0: sampled), travelling with `span_id`.
    pub trace_flags: u8,
    /// The payload's compression (`crate::Encoding` code); none: plain. Set and removed
    /// by the transport, never seen by handlers.
    pub content_encoding: Option<u8>,
    /// The encodings the sender accepts (one bit per `crate::Encoding`; 0: none, not
    /// encoded).
    pub accept_encoding: u8,
    /// Fields the sender encoded ahead (`tag, length, value` each), written first and as
    /// they are: a caller's per-call text (service, method, content type, tags) goes from
    /// borrowed `&str` straight to bytes ([`crate::TextFields`]) instead of a `String`
    /// each. It must not repeat a field set above. `decode` never fills it: a received
    /// frame's fields are all in the typed fields.
    pub encoded: Bytes,
}

pub(crate) fn put_field(out: &mut BytesMut, tag: u8, value: &[u8]) -> Result<(), WireError> {
    put_parts(out, tag, &[value])
}

/// One field whose value is `parts` joined, written without joining them first.
fn put_parts(out: &mut BytesMut, tag: u8, parts: &[&[u8]]) -> Result<(), WireError> {
    let size: usize = parts.iter().map(|p| p.len()).sum();
    let len = u16::try_from(size).map_err(|_| {
        WireError::Malformed(format!("metadata field {tag} is {size} bytes, over 65,535"))
    })?;
    out.put_u8(tag);
    out.put_u16(len);
    for part in parts {
        out.put_slice(part);
    }
    Ok(())
}

/// A tag field, `key=value`; a key with `=` in it could not be read back.
pub(crate) fn put_tag(out: &mut BytesMut, key: &str, value: &str) -> Result<(), WireError> {
    if key.contains('=') {
        return Err(WireError::Malformed(format!(
            "tag key {key:?} contains '='"
        )));
    }
    put_parts(out, TAG, &[key.as_bytes(), b"=", value.as_bytes()])
}

fn text(tag: u8, value: &[u8]) -> Result<String, WireError> {
    text_ref(tag, value).map(str::to_owned)
}

/// A text field as a slice of the section it was read from: no copy.
fn shared_text(tag: u8, section: &Bytes, value: &[u8]) -> Result<ByteString, WireError> {
    ByteString::try_from(section.slice_ref(value))
        .map_err(|_| WireError::Malformed(format!("metadata field {tag} is not UTF-8")))
}

fn text_ref(tag: u8, value: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(value)
        .map_err(|_| WireError::Malformed(format!("metadata field {tag} is not UTF-8")))
}

fn fixed<const N: usize>(tag: u8, value: &[u8]) -> Result<[u8; N], WireError> {
    value.try_into().map_err(|_| {
        WireError::Malformed(format!(
            "metadata field {tag} has {} bytes, expected {N}",
            value.len()
        ))
    })
}

impl Metadata {
    /// Appends the encoded fields to `out`.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), WireError> {
        out.put_slice(&self.encoded);
        if let Some(v) = &self.service {
            put_field(out, SERVICE, v.as_bytes())?;
        }
        if let Some(v) = &self.method {
            put_field(out, METHOD, v.as_bytes())?;
        }
        if let Some(v) = self.deadline_us {
            put_field(out, DEADLINE, &v.to_be_bytes())?;
        }
        if let Some(v) = &self.consumer_app {
            put_field(out, CONSUMER_APP, v.as_bytes())?;
        }
        for (k, v) in &self.tags {
            put_tag(out, k, v)?;
        }
        if let Some(v) = &self.content_type {
            put_field(out, CONTENT_TYPE, v.as_bytes())?;
        }
        if let Some(v) = &self.trace_id {
            put_field(out, TRACE_ID, v)?;
        }
        if let Some(v) = self.error_class {
            put_field(out, ERROR_CLASS, &[v as u8])?;
        }
        if let Some(v) = &self.error_message {
            put_field(out, ERROR_MESSAGE, v.as_bytes())?;
        }
        if let Some(v) = self.retry_after_ms {
            put_field(out, RETRY_AFTER, &v.to_be_bytes())?;
        }
        if let Some(v) = &self.request_id {
            put_field(out, REQUEST_ID, v)?;
        }
        if let Some(v) = &self.error_code {
            put_field(out, ERROR_CODE, v.as_bytes())?;
        }
        if let Some(v) = &self.span_id {
            let mut value = [0; 9];
            value[..8].copy_from_slice(v);
            value[8] = self.trace_flags;
            put_field(out, SPAN_ID, &value)?;
        }
        if let Some(v) = self.content_encoding {
            put_field(out, CONTENT_ENCODING, &[v])?;
        }
        if self.accept_encoding != 0 {
            put_field(out, ACCEPT_ENCODING, &[self.accept_encoding])?;
        }
        Ok(())
    }

    /// Decodes a whole metadata section. Unknown tags are skipped. The service and method
    /// share `section`'s bytes.
    pub fn decode(section: &Bytes) -> Result<Metadata, WireError> {
        let mut src: &[u8] = section;
        let mut m = Metadata::default();
        while src.has_remaining() {
            if src.remaining() < 3 {
                return Err(WireError::Malformed(
                    "metadata ends inside a field header".into(),
                ));
            }
            let tag = src.get_u8();
            let len = usize::from(src.get_u16());
            if src.remaining() < len {
                return Err(WireError::Malformed(format!(
                    "metadata field {tag} claims {len} bytes, {} left",
                    src.remaining()
                )));
            }
            let (value, rest) = src.split_at(len);
            src = rest;
            match tag {
                SERVICE => m.service = Some(shared_text(tag, section, value)?),
                METHOD => m.method = Some(shared_text(tag, section, value)?),
                DEADLINE => m.deadline_us = Some(u64::from_be_bytes(fixed(tag, value)?)),
                CONSUMER_APP => m.consumer_app = Some(text(tag, value)?),
                TAG => {
                    let t = text(tag, value)?;
                    let (k, v) = t.split_once('=').ok_or_else(|| {
                        WireError::Malformed(format!("tag {t:?} is not key=value"))
                    })?;
                    m.tags.push((k.to_string(), v.to_string()));
                }
                CONTENT_TYPE => m.content_type = Some(ContentType::new(text_ref(tag, value)?)),
                TRACE_ID => m.trace_id = Some(fixed(tag, value)?),
                ERROR_CLASS => {
                    let [code] = fixed::<1>(tag, value)?;
                    m.error_class = Some(ErrorClass::from_code(code).ok_or_else(|| {
                        WireError::Malformed(format!("unknown error class {code}"))
                    })?);
                }
                ERROR_MESSAGE => m.error_message = Some(text(tag, value)?),
                RETRY_AFTER => m.retry_after_ms = Some(u32::from_be_bytes(fixed(tag, value)?)),
                REQUEST_ID => m.request_id = Some(fixed(tag, value)?),
                ERROR_CODE => m.error_code = Some(text(tag, value)?),
                SPAN_ID => {
                    let v: [u8; 9] = fixed(tag, value)?;
                    let mut span = [0; 8];
                    span.copy_from_slice(&v[..8]);
                    m.span_id = Some(span);
                    m.trace_flags = v[8];
                }
                CONTENT_ENCODING => m.content_encoding = Some(fixed::<1>(tag, value)?[0]),
                ACCEPT_ENCODING => m.accept_encoding = fixed::<1>(tag, value)?[0],
                _ => {} // a newer peer's field
            }
        }
        Ok(m)
    }
}
