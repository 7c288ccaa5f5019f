//! MessagePack ↔ packed value, streamed: each node is written as it is read, in both
//! directions, with no tree in between. Every node of the value model maps one to one
//! (binary and non-text map keys included); extension types are refused on decode.

use axle_sdk::packed::{each_node, Item, Reader, Writer};

use rmp::Marker;

use crate::write;

/// Packed value → MessagePack bytes.
pub fn encode_packed(packed: &[u8]) -> Result<Vec<u8>, String> {
    let mut reader = Reader::new(packed);
    let mut out = axle_sdk::answer_buffer(packed.len());
    each_node(|| write_one(&mut reader, &mut out))?;
    if !reader.is_empty() {
        return Err("packed value has bytes after its root".to_string());
    }
    Ok(out)
}

/// MessagePack bytes → packed value.
pub fn decode_packed(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut input = Input(bytes);
    let mut out = Writer::from_buffer(axle_sdk::answer_buffer(bytes.len() + 16));
    each_node(|| read_one(&mut input, &mut out))
        .map_err(|e| format!("invalid MessagePack: {e}"))?;
    if !input.0.is_empty() {
        return Err(format!(
            "invalid MessagePack: {} trailing byte(s)",
            input.0.len()
        ));
    }
    Ok(out.into_bytes())
}

/// Writes one node; answers how many children follow it.
#[inline(always)]
fn write_one(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<u64, String> {
    let item = r.item()?;
    match item {
        Item::Null => write::nil(out),
        Item::Boolean(b) => write::boolean(out, b),
        Item::Signed(i) => write::signed(out, i),
        Item::Unsigned(u) => write::unsigned(out, u),
        Item::Float(f) => write::float(out, f),
        Item::Text(s) => write::str(out, s),
        Item::Binary(b) => write::bin(out, b),
        Item::Array(n) => write::array(out, n),
        Item::Mapping(n) => write::map(out, n),
    }
    Ok(match item {
        Item::Array(n) => u64::from(n),
        Item::Mapping(n) => 2 * u64::from(n),
        _ => 0,
    })
}

/// What is left of the MessagePack input.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("{n} byte(s) wanted, {} left", self.0.len()));
        }
        let (run, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(run)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    fn len(&mut self, width: usize) -> Result<usize, String> {
        Ok(match width {
            1 => usize::from(self.be::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.be()?)),
            _ => u32::from_be_bytes(self.be()?) as usize,
        })
    }

    /// A count of subtrees taking at least `per` bytes each, checked against what is left
    /// before it sizes anything.
    fn count(&mut self, width: usize, per: usize) -> Result<u32, String> {
        let n = self.len(width)?;
        if n.saturating_mul(per) > self.0.len() {
            return Err(format!("a count of {n} exceeds the input left"));
        }
        Ok(n as u32)
    }
}

/// Reads one node; answers how many children follow it.
#[inline(always)]
fn read_one(i: &mut Input<'_>, out: &mut Writer) -> Result<u64, String> {
    let marker = Marker::from_u8(i.be::<1>()?[0]);
    let children = match marker {
        Marker::Null => {
            out.null();
            0
        }
        Marker::False | Marker::True => {
            out.boolean(marker == Marker::True);
            0
        }
        Marker::FixPos(n) => {
            out.signed(i64::from(n));
            0
        }
        Marker::FixNeg(n) => {
            out.signed(i64::from(n));
            0
        }
        Marker::U8 => signed(out, i.be::<1>()?[0]),
        Marker::U16 => signed(out, u16::from_be_bytes(i.be()?)),
        Marker::U32 => signed(out, u32::from_be_bytes(i.be()?)),
        Marker::U64 => {
            let u = u64::from_be_bytes(i.be()?);
            match i64::try_from(u) {
                Ok(s) => out.signed(s),
                Err(_) => out.unsigned(u),
            }
            0
        }
        Marker::I8 => signed(out, i8::from_be_bytes(i.be()?)),
        Marker::I16 => signed(out, i16::from_be_bytes(i.be()?)),
        Marker::I32 => signed(out, i32::from_be_bytes(i.be()?)),
        Marker::I64 => signed(out, i64::from_be_bytes(i.be()?)),
        Marker::F32 => {
            out.float(f64::from(f32::from_be_bytes(i.be()?)));
            0
        }
        Marker::F64 => {
            out.float(f64::from_be_bytes(i.be()?));
            0
        }
        Marker::FixStr(n) => str(i, out, usize::from(n))?,
        Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            let n = i.len(width(marker, Marker::Str8))?;
            str(i, out, n)?
        }
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
            let n = i.len(width(marker, Marker::Bin8))?;
            out.binary(i.take(n)?)?;
            0
        }
        Marker::FixArray(n) => array(out, u32::from(n)),
        Marker::Array16 => array(out, i.count(2, 1)?),
        Marker::Array32 => array(out, i.count(4, 1)?),
        Marker::FixMap(n) => mapping(out, u32::from(n)),
        Marker::Map16 => mapping(out, i.count(2, 2)?),
        Marker::Map32 => mapping(out, i.count(4, 2)?),
        Marker::FixExt1
        | Marker::FixExt2
        | Marker::FixExt4
        | Marker::FixExt8
        | Marker::FixExt16 => return Err(extension(i.be::<1>()?[0])),
        Marker::Ext8 | Marker::Ext16 | Marker::Ext32 => {
            i.len(width(marker, Marker::Ext8))?;
            return Err(extension(i.be::<1>()?[0]));
        }
        Marker::Reserved => return Err("the reserved marker 0xc1".to_string()),
    };
    Ok(children)
}

/// The length field's width of an 8/16/32 marker family, from its first member.
fn width(marker: Marker, first: Marker) -> usize {
    1 << (marker.to_u8() - first.to_u8())
}

fn signed(out: &mut Writer, n: impl Into<i64>) -> u64 {
    out.signed(n.into());
    0
}

fn str(i: &mut Input<'_>, out: &mut Writer, n: usize) -> Result<u64, String> {
    let s = axle_sdk::utf8_text(i.take(n)?).map_err(|_| "string is not valid UTF-8")?;
    out.text(s)?;
    Ok(0)
}

fn array(out: &mut Writer, n: u32) -> u64 {
    out.array(n);
    u64::from(n)
}

fn mapping(out: &mut Writer, n: u32) -> u64 {
    out.mapping(n);
    2 * u64::from(n)
}

fn extension(tag: u8) -> String {
    format!("extension type {} is not supported", tag as i8)
}
