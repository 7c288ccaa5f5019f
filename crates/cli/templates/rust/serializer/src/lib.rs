//! `{{name}}`: a small binary encoding of the value model that round-trips every value.
//! Each node in pre-order is one tag byte (0 null, 1 boolean, 2 signed, 3 unsigned,
//! 4 float, 5 text, 6 binary, 7 array, 8 mapping) followed by its payload, little-endian:
//! a byte for a boolean, 8 bytes for numbers, a u32 length and the bytes for text and
//! binary, a u32 count for arrays and mappings. `decode` checks that the bytes hold
//! exactly one complete value.
//!
//! Config: none (any key is refused, so a typo in the manifest fails the load).

use axle_sdk::{Config, Node, Serializer, Value};

/// The serializer.
pub struct Tlv;

/// What `content-type` answers (and the kernel writes into frames).
const CONTENT_TYPE: &str = "application/x-axle-tlv";

impl Serializer for Tlv {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(Tlv)
    }

    fn content_type(&self) -> String {
        CONTENT_TYPE.to_string()
    }

    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        for node in &value.nodes {
            match node {
                Node::Null => out.push(0),
                Node::Boolean(b) => out.extend_from_slice(&[1, u8::from(*b)]),
                Node::Signed(i) => put(&mut out, 2, &i.to_le_bytes()),
                Node::Unsigned(u) => put(&mut out, 3, &u.to_le_bytes()),
                Node::Float(f) => put(&mut out, 4, &f.to_le_bytes()),
                Node::Text(s) => put_bytes(&mut out, 5, s.as_bytes())?,
                Node::Binary(b) => put_bytes(&mut out, 6, b)?,
                Node::Array(n) => put(&mut out, 7, &n.to_le_bytes()),
                Node::Mapping(n) => put(&mut out, 8, &n.to_le_bytes()),
            }
        }
        Ok(out)
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        let mut r = Reader { bytes, at: 0 };
        let mut nodes = Vec::new();
        // Subtrees still to read: the root, then what each array or mapping announces.
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let at = r.at;
            let node = match r.take(1)?[0] {
                0 => Node::Null,
                1 => match r.take(1)?[0] {
                    0 => Node::Boolean(false),
                    1 => Node::Boolean(true),
                    b => return Err(format!("byte {}: boolean {b} is neither 0 nor 1", at + 1)),
                },
                2 => Node::Signed(i64::from_le_bytes(r.array()?)),
                3 => Node::Unsigned(u64::from_le_bytes(r.array()?)),
                4 => Node::Float(f64::from_le_bytes(r.array()?)),
                5 => {
                    let len = r.len()?;
                    let text = std::str::from_utf8(r.take(len)?)
                        .map_err(|e| format!("byte {at}: text is not UTF-8: {e}"))?;
                    Node::Text(text.to_string())
                }
                6 => {
                    let len = r.len()?;
                    Node::Binary(r.take(len)?.to_vec())
                }
                7 => {
                    let n = u32::from_le_bytes(r.array()?);
                    pending += u64::from(n);
                    Node::Array(n)
                }
                8 => {
                    let n = u32::from_le_bytes(r.array()?);
                    pending += 2 * u64::from(n);
                    Node::Mapping(n)
                }
                tag => return Err(format!("byte {at}: unknown tag {tag}")),
            };
            nodes.push(node);
        }
        if r.at != bytes.len() {
            return Err(format!("byte {}: trailing bytes after the value", r.at));
        }
        Ok(Value { nodes })
    }
}

fn put(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    out.extend_from_slice(payload);
}

fn put_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) -> Result<(), String> {
    let len = u32::try_from(bytes.len()).map_err(|_| "a text or binary over 4 GiB".to_string())?;
    put(out, tag, &len.to_le_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// A cursor over the input; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("byte {}: the input ends inside a value", self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len(&mut self) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.array()?) as usize)
    }
}

axle_sdk::export_serializer!(Tlv);
