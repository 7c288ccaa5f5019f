//! JSON text ↔ packed value, streamed: serde_json writes JSON as the packed value is read,
//! and its parser writes the packed value as it reads JSON, so no tree is built on either
//! side and each string is copied once. Binary values become arrays of byte numbers (JSON
//! has no bytes); map keys must be text; non-finite floats are refused; an object's
//! members are kept in order, a repeated name included. Kept apart from the plugin's
//! export so that a test fixture can speak the same JSON (`#[path]` include).

use std::cell::RefCell;

use axle_sdk::packed::{Item, Reader, Writer};
use axle_sdk::{Value, MAX_DEPTH};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, Error as _, Serialize, SerializeMap, SerializeSeq};

/// Value → JSON bytes.
pub fn encode(value: &Value) -> Result<Vec<u8>, String> {
    encode_packed(&value.pack()?)
}

/// JSON bytes → value.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    Value::unpack(&decode_packed(bytes)?)
}

/// Packed value → JSON bytes.
pub fn encode_packed(packed: &[u8]) -> Result<Vec<u8>, String> {
    let reader = RefCell::new(Reader::new(packed));
    // JSON is about as long as the packed form for text, shorter for numbers.
    let mut out = Vec::with_capacity(packed.len() + 16);
    let root = Packed {
        reader: &reader,
        depth: 0,
    };
    serde_json::to_writer(&mut out, &root).map_err(|e| e.to_string())?;
    if !reader.borrow().is_empty() {
        return Err("packed value has bytes after its root".to_string());
    }
    Ok(out)
}

/// JSON bytes → packed value.
pub fn decode_packed(bytes: &[u8]) -> Result<Vec<u8>, String> {
    // Checked whole here, ASCII 32 bytes at a time, so the parser reads a `str` and does
    // not check each string again (the slice parser's check was a twelfth of a decode in
    // a component: `docs/performance.md`, "Serializers").
    let text = axle_sdk::utf8_text(bytes)
        .map_err(|e| format!("invalid JSON: not UTF-8 at byte {}", e.valid_up_to()))?;
    let mut out = Writer::with_capacity(bytes.len() + 16);
    let mut parser = serde_json::Deserializer::from_str(text);
    Pack(&mut out)
        .deserialize(&mut parser)
        .and_then(|()| parser.end())
        .map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(out.into_bytes())
}

/// The subtree at the reader's position, serialized as it is read.
struct Packed<'r, 'a> {
    reader: &'r RefCell<Reader<'a>>,
    depth: usize,
}

impl Packed<'_, '_> {
    fn item<E: ser::Error>(&self) -> Result<Item<'_>, E> {
        self.reader.borrow_mut().item().map_err(E::custom)
    }
}

impl Serialize for Packed<'_, '_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.depth > MAX_DEPTH {
            return Err(S::Error::custom(format!(
                "value nests deeper than {MAX_DEPTH} levels"
            )));
        }
        let child = Packed {
            reader: self.reader,
            depth: self.depth + 1,
        };
        match self.item()? {
            Item::Null => s.serialize_unit(),
            Item::Boolean(b) => s.serialize_bool(b),
            Item::Signed(i) => s.serialize_i64(i),
            Item::Unsigned(u) => s.serialize_u64(u),
            // serde_json would write `null` for these: refused rather than changed.
            Item::Float(f) if !f.is_finite() => {
                Err(S::Error::custom(format!("JSON cannot hold the float {f}")))
            }
            Item::Float(f) => s.serialize_f64(f),
            Item::Text(t) => s.serialize_str(t),
            Item::Binary(b) => {
                let mut seq = s.serialize_seq(Some(b.len()))?;
                for byte in b {
                    seq.serialize_element(byte)?;
                }
                seq.end()
            }
            Item::Array(n) => {
                let mut seq = s.serialize_seq(Some(n as usize))?;
                for _ in 0..n {
                    seq.serialize_element(&child)?;
                }
                seq.end()
            }
            Item::Mapping(n) => {
                let mut map = s.serialize_map(Some(n as usize))?;
                for _ in 0..n {
                    match self.item()? {
                        Item::Text(key) => map.serialize_key(key)?,
                        other => {
                            return Err(S::Error::custom(format!(
                                "JSON object keys must be text, got {other:?}"
                            )))
                        }
                    }
                    map.serialize_value(&child)?;
                }
                map.end()
            }
        }
    }
}

/// Writes the JSON value the parser reads next into the packed value.
struct Pack<'w>(&'w mut Writer);

impl<'de> DeserializeSeed<'de> for Pack<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pack<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.null();
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        self.0.boolean(b);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<(), E> {
        self.0.signed(i);
        Ok(())
    }

    /// Signed whenever it fits, as a JSON number has no sign type.
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        match i64::try_from(u) {
            Ok(i) => self.0.signed(i),
            Err(_) => self.0.unsigned(u),
        }
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<(), E> {
        self.0.float(f);
        Ok(())
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.0.text(s).map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let open = self.0.begin(false);
        let mut n = 0u32;
        while seq.next_element_seed(Pack(&mut *self.0))?.is_some() {
            n = more(n)?;
        }
        self.0.end(open, n);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let open = self.0.begin(true);
        let mut n = 0u32;
        while map.next_key_seed(Pack(&mut *self.0))?.is_some() {
            map.next_value_seed(Pack(&mut *self.0))?;
            n = more(n)?;
        }
        self.0.end(open, n);
        Ok(())
    }
}

fn more<E: de::Error>(n: u32) -> Result<u32, E> {
    n.checked_add(1)
        .ok_or_else(|| E::custom("more than 4,294,967,295 items"))
}
