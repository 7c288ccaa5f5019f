//! JSON text ↔ packed value, streamed: JSON is written as the packed value is read
//! (`write.rs`), and serde_json's parser writes the packed value as it reads JSON, so no
//! tree is built on either side and each string is copied once. Binary values become
//! arrays of byte numbers (JSON has no bytes); map keys must be text; non-finite floats are
//! refused; an object's members are kept in order, a repeated name included. Kept apart
//! from the plugin's export so that a test fixture can speak the same JSON (`#[path]`
//! include).

use axle_sdk::packed::Writer;
use axle_sdk::Value;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

// By path, so that the fixture including this file by path finds it too.
#[path = "write.rs"]
mod write;

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
    write::json(packed)
}

/// JSON bytes → packed value.
pub fn decode_packed(bytes: &[u8]) -> Result<Vec<u8>, String> {
    // Checked whole here, ASCII 32 bytes at a time, so the parser reads a `str` and does
    // not check each string again (the slice parser's check was a twelfth of a decode in
    // a component: `docs/performance.md`, "Serializers").
    let text = axle_sdk::utf8_text(bytes)
        .map_err(|e| format!("invalid JSON: not UTF-8 at byte {}", e.valid_up_to()))?;
    let mut out = Writer::from_buffer(axle_sdk::answer_buffer(bytes.len() + 16));
    let mut parser = serde_json::Deserializer::from_str(text);
    Pack(&mut out)
        .deserialize(&mut parser)
        .and_then(|()| parser.end())
        .map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(out.into_bytes())
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
