//! Packed value → JSON text, written straight from the reader.
//!
//! serde_json's serializer scanned each text for bytes to escape one byte a loop turn, and
//! in a component every loop turn also checks the engine's epoch (how a plugin that spins
//! is interrupted): that scan was most of an encode of a long text. This one tests 32
//! bytes a turn, 16 to an instruction (`axle_sdk::lanes`), while the text is clean, and
//! the last 31 bytes a word at a time (`docs/performance.md`, "JSON text scanned 32 bytes
//! a turn", "Texts scanned 16 bytes an instruction"). The text written is
//! serde_json's, byte for byte: the same escapes, and its own formatter for numbers.

use axle_sdk::lanes::Lanes;
use axle_sdk::packed::{Item, Reader};
use axle_sdk::short_word;
use axle_sdk::MAX_DEPTH;
use serde_json::ser::{CompactFormatter, Formatter};

/// Packed value → JSON bytes.
pub fn json(packed: &[u8]) -> Result<Vec<u8>, String> {
    let mut reader = Reader::new(packed);
    // JSON is about as long as the packed form for text, shorter for numbers.
    let mut out = axle_sdk::answer_buffer(packed.len() + 16);
    value(&mut reader, &mut out, 0)?;
    if !reader.is_empty() {
        return Err("packed value has bytes after its root".to_string());
    }
    Ok(out)
}

/// The subtree at the reader's position, at `depth`. Inlined into the loops of [`array`]
/// and [`object`], so a leaf costs no call and a container one: in a component every call
/// pays a stack check, the epoch check and saved registers (`docs/performance.md`, "A call
/// per container, not per node").
#[inline(always)]
fn value(reader: &mut Reader, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    // Writing into a `Vec` cannot fail: the formatter's `io::Result`s are all `Ok`.
    let mut f = CompactFormatter;
    match reader.item()? {
        Item::Null => out.extend_from_slice(b"null"),
        Item::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Item::Signed(i) => _ = f.write_i64(out, i),
        Item::Unsigned(u) => _ = f.write_u64(out, u),
        // serde_json would write `null` for these: refused rather than changed.
        Item::Float(x) if !x.is_finite() => return Err(format!("JSON cannot hold the float {x}")),
        Item::Float(x) => _ = f.write_f64(out, x),
        Item::Text(t) => text(out, t),
        // JSON has no bytes: an array of their numbers.
        Item::Binary(bytes) => {
            out.push(b'[');
            for (i, &byte) in (0u64..).zip(bytes) {
                comma_before(out, i);
                _ = f.write_u8(out, byte);
            }
            out.push(b']');
        }
        Item::Array(n) => array(reader, out, n, depth + 1)?,
        Item::Mapping(n) => object(reader, out, n, depth + 1)?,
    }
    Ok(())
}

/// An array of `n` elements at `depth`.
fn array(reader: &mut Reader, out: &mut Vec<u8>, n: u32, depth: usize) -> Result<(), String> {
    within_depth(n, depth)?;
    out.push(b'[');
    for i in 0..n {
        comma_before(out, i);
        value(reader, out, depth)?;
    }
    out.push(b']');
    Ok(())
}

/// An object of `n` members whose values are at `depth`.
fn object(reader: &mut Reader, out: &mut Vec<u8>, n: u32, depth: usize) -> Result<(), String> {
    within_depth(n, depth)?;
    out.push(b'{');
    for i in 0..n {
        comma_before(out, i);
        match reader.item()? {
            Item::Text(key) => text(out, key),
            other => return Err(format!("JSON object keys must be text, got {other:?}")),
        }
        out.push(b':');
        value(reader, out, depth)?;
    }
    out.push(b'}');
    Ok(())
}

/// Refuses `n` children at `depth` past [`MAX_DEPTH`]; an empty container holds no node
/// that deep.
fn within_depth(n: u32, depth: usize) -> Result<(), String> {
    if n > 0 && depth > MAX_DEPTH {
        return Err(format!("value nests deeper than {MAX_DEPTH} levels"));
    }
    Ok(())
}

/// The `,` before every element or member but the first (`i` counts from 0).
fn comma_before(out: &mut Vec<u8>, i: impl Into<u64>) {
    if i.into() > 0 {
        out.push(b',');
    }
}

/// A JSON string: `t` between quotes, escaped as serde_json escapes it.
fn text(out: &mut Vec<u8>, t: &str) {
    let bytes = t.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(at) = next_escape(bytes, start) {
        axle_sdk::copy::extend(out, &bytes[start..at]);
        escape(out, bytes[at]);
        start = at + 1;
    }
    axle_sdk::copy::extend(out, &bytes[start..]);
    out.push(b'"');
}

/// Eight copies of a byte.
const fn repeated(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// Where the first byte at or after `from` that JSON must escape is.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    // Clean text 32 bytes a turn, 16 to an instruction; the first mark of the turn that
    // has one is the escape.
    while let Some((block, _)) = bytes[at..].split_first_chunk::<32>() {
        let (low, high) = Lanes::load_pair(block);
        let (low, high) = (escapes(low), escapes(high));
        if low.or(high).any() {
            let marks = low.marks() | high.marks() << 16;
            return Some(at + marks.trailing_zeros() as usize);
        }
        at += 32;
    }
    // Under 32 bytes left: a word at a time.
    while let Some((word, _)) = bytes[at..].split_first_chunk::<8>() {
        let found = escapes_in(u64::from_le_bytes(*word));
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    // Fewer than 8 bytes left: one word of them, zero above, whose marks are kept for
    // the bytes that are there (the zeros, being above, cannot move a lower mark).
    let tail = &bytes[at..];
    let found = escapes_in(short_word(tail)) & ((1u64 << (8 * tail.len())) - 1);
    (found != 0).then(|| at + found.trailing_zeros() as usize / 8)
}

/// The lanes JSON must escape: a control byte, `"` or `\`.
#[inline(always)]
fn escapes(bytes: Lanes) -> Lanes {
    bytes.below(0x20).or(bytes.eq(b'"')).or(bytes.eq(b'\\'))
}

/// The high bit of each byte of `word` (read little-endian) that JSON must escape: a
/// control byte, `"` or `\`. A borrow can mark a byte above a marked one, never below,
/// so the lowest mark is always exact, and only the lowest is used.
fn escapes_in(word: u64) -> u64 {
    let high = repeated(0x80);
    let below_space = word.wrapping_sub(repeated(0x20)) & !word;
    let is = |b: u8| {
        let x = word ^ repeated(b);
        x.wrapping_sub(repeated(0x01)) & !x
    };
    (below_space | is(b'"') | is(b'\\')) & high
}

/// The escape serde_json writes for `b`: a control byte, `"` or `\`.
fn escape(out: &mut Vec<u8>, b: u8) {
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let code = [HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]];
            out.extend_from_slice(b"\\u00");
            out.extend_from_slice(&code);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn must_escape(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }

    fn serde(t: &str) -> String {
        serde_json::to_string(t).unwrap()
    }

    fn ours(t: &str) -> String {
        let mut out = Vec::new();
        text(&mut out, t);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_ascii_byte_is_written_as_serde_json_writes_it() {
        for b in 0u8..0x80 {
            let one = (b as char).to_string();
            assert_eq!(ours(&one), serde(&one), "byte {b:#04x}");
            // At each position of a block of 32, of a word, and of the tail after them.
            for at in 0..70 {
                let t = format!("{}{}{}", "a".repeat(at), one, "é".repeat(3));
                assert_eq!(ours(&t), serde(&t), "byte {b:#04x} at {at}");
            }
            // At each position of a short text, read as one word, alone and before an
            // escape that follows it.
            for len in 1..16 {
                for at in 0..len {
                    let mut t = "a".repeat(len);
                    t.replace_range(at..=at, &one);
                    assert_eq!(ours(&t), serde(&t), "byte {b:#04x} at {at} of {len}");
                    t.push('"');
                    assert_eq!(ours(&t), serde(&t), "byte {b:#04x} at {at} of {len}, \"");
                }
            }
        }
    }

    #[test]
    fn the_lowest_mark_of_a_word_is_its_first_escape() {
        // Every pair of bytes at every pair of positions of one word, against a byte scan:
        // the case where a borrow from a lower byte could mark a higher one.
        let interesting = [
            0x00, 0x01, 0x1f, 0x20, 0x21, b'"', b'\\', 0x7f, 0x80, 0xff, b'a',
        ];
        for &x in &interesting {
            for &y in &interesting {
                for i in 0..8 {
                    for j in 0..8 {
                        let mut word = [b'a'; 8];
                        word[i] = x;
                        word[j] = y;
                        let first = word.iter().position(|&b| must_escape(b));
                        let found = escapes_in(u64::from_le_bytes(word));
                        let lowest = (found != 0).then(|| found.trailing_zeros() as usize / 8);
                        assert_eq!(lowest, first, "{word:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn long_texts_mixed_match_serde_json() {
        let mut t = String::new();
        for i in 0..600u32 {
            t.push(
                char::from_u32(i % 0x3000)
                    .filter(|c| *c != '\u{0}')
                    .unwrap_or('x'),
            );
            if i % 37 == 0 {
                t.push_str("\"\\\n\u{1}😀");
            }
        }
        assert_eq!(ours(&t), serde(&t));
        assert_eq!(ours(""), serde(""));
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        let packed = |v: &axle_sdk::Value| json(&v.pack().unwrap()).unwrap();
        for x in [
            0.0,
            -0.0,
            1.5,
            1e300,
            -2.5e-300,
            0.1,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let v = axle_sdk::Value::from_tree(&axle_sdk::Tree::Float(x));
            assert_eq!(packed(&v), serde_json::to_vec(&x).unwrap());
        }
        for i in [0, -1, i64::MIN, i64::MAX] {
            let v = axle_sdk::Value::from_tree(&axle_sdk::Tree::Signed(i));
            assert_eq!(packed(&v), serde_json::to_vec(&i).unwrap());
        }
        let v = axle_sdk::Value::from_tree(&axle_sdk::Tree::Binary(vec![0, 7, 255]));
        assert_eq!(packed(&v), b"[0,7,255]");
    }
}
