//! A request's text fields, borrowed, encoded once into [`Metadata::encoded`]. The caller
//! has them as `&str` (its service's name, the method it was asked for, its content
//! type); copying each into a `String` only to write it out once is three allocations per
//! call. They are written instead into a per-thread scratch buffer that hands out
//! `Bytes` views of itself: one allocation per block of many requests.
//!
//! [`Metadata::encoded`]: crate::Metadata::encoded

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};

use crate::metadata::{put_field, put_tag, CONSUMER_APP, CONTENT_TYPE, METHOD, SERVICE};
use crate::WireError;

/// Scratch blocks are this large: a request's text is tens of bytes, so one block serves
/// some hundred requests before the next is allocated. A block lives while a request
/// encoded in it is still queued.
const BLOCK: usize = 8 << 10;

thread_local! {
    static SCRATCH: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The text a request carries, borrowed from the caller.
#[derive(Clone, Copy, Debug)]
pub struct TextFields<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub consumer_app: Option<&'a str>,
    pub tags: &'a [(String, String)],
    pub content_type: &'a str,
}

impl TextFields<'_> {
    /// The fields encoded, for [`Metadata::encoded`](crate::Metadata::encoded). Fails
    /// like [`Metadata::encode`](crate::Metadata::encode) would: a field over 65,535
    /// bytes, a tag key with `=` in it.
    pub fn encode(&self) -> Result<Bytes, WireError> {
        SCRATCH.with(|scratch| {
            let mut out = scratch.borrow_mut();
            if out.capacity() < BLOCK / 8 {
                out.reserve(BLOCK);
            }
            match self.write(&mut out) {
                Ok(()) => Ok(out.split().freeze()),
                Err(e) => {
                    out.clear();
                    Err(e)
                }
            }
        })
    }

    fn write(&self, out: &mut BytesMut) -> Result<(), WireError> {
        put_field(out, SERVICE, self.service.as_bytes())?;
        put_field(out, METHOD, self.method.as_bytes())?;
        if let Some(app) = self.consumer_app {
            put_field(out, CONSUMER_APP, app.as_bytes())?;
        }
        for (k, v) in self.tags {
            put_tag(out, k, v)?;
        }
        put_field(out, CONTENT_TYPE, self.content_type.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metadata;

    fn fields<'a>(tags: &'a [(String, String)], app: Option<&'a str>) -> TextFields<'a> {
        TextFields {
            service: "echo",
            method: "say",
            consumer_app: app,
            tags,
            content_type: "application/json",
        }
    }

    #[test]
    fn encoded_fields_decode_as_the_typed_ones() {
        let tags = vec![("zone".to_string(), "a=b".to_string())];
        let meta = Metadata {
            encoded: fields(&tags, Some("web")).encode().expect("encode"),
            deadline_us: Some(7),
            ..Metadata::default()
        };
        let mut out = BytesMut::new();
        meta.encode(&mut out).expect("encode");
        let back = Metadata::decode(&out.freeze()).expect("decode");
        let typed = Metadata {
            service: Some("echo".into()),
            method: Some("say".into()),
            consumer_app: Some("web".into()),
            tags: tags.clone(),
            content_type: Some("application/json".into()),
            deadline_us: Some(7),
            ..Metadata::default()
        };
        assert_eq!(back, typed);
        let mut typed_bytes = BytesMut::new();
        typed.encode(&mut typed_bytes).expect("encode");
        assert_eq!(
            Metadata::decode(&typed_bytes.freeze()).expect("decode"),
            typed
        );
    }

    #[test]
    fn successive_encodings_are_independent_across_blocks() {
        // More than a block's worth, each different: every result keeps its own bytes
        // while the scratch moves on, and on to the next block.
        let methods: Vec<String> = (0..2 * BLOCK / 30).map(|i| format!("m{i}")).collect();
        let kept: Vec<Bytes> = methods
            .iter()
            .map(|method| {
                let f = TextFields {
                    method,
                    ..fields(&[], None)
                };
                f.encode().expect("encode")
            })
            .collect();
        for (method, bytes) in methods.iter().zip(&kept) {
            let meta = Metadata::decode(bytes).expect("decode");
            assert_eq!(meta.method.as_deref(), Some(method.as_str()));
            assert_eq!(meta.service.as_deref(), Some("echo"));
        }
    }

    #[test]
    fn bad_fields_are_errors_and_leave_nothing_behind() {
        let tags = vec![("a=b".to_string(), "c".to_string())];
        let err = fields(&tags, None).encode().expect_err("a key with '='");
        assert!(err.to_string().contains("contains '='"), "{err}");
        let long = "x".repeat(70_000);
        let over = TextFields {
            method: &long,
            ..fields(&[], None)
        };
        let err = over.encode().expect_err("over 65,535 bytes");
        assert!(err.to_string().contains("over 65,535"), "{err}");
        // The next encoding starts clean: no half-written field before it.
        let next = fields(&[], None).encode().expect("encode");
        assert_eq!(
            Metadata::decode(&next).expect("decode").service.as_deref(),
            Some("echo")
        );
    }
}
