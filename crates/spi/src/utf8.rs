//! UTF-8 validation that passes ASCII 32 bytes at a time.
//!
//! Why: every text of a packed value is checked on both sides of the boundary, and a
//! serializer's texts are mostly ASCII. `core::str::from_utf8` skips ASCII a machine word
//! at a time, and a WebAssembly guest's word is 4 bytes: in a component its check of a
//! 1 KiB text was an eighth of a MessagePack encode (`docs/performance.md`,
//! "Serializers"). Here ASCII is tested 16 bytes at a time ([`Lanes`]), the tail with
//! 64-bit words, which a wasm32 guest has natively; a text with any other byte goes to
//! `from_utf8` whole.

use crate::lanes::Lanes;

/// Every byte of an ASCII word has its high bit clear.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// `bytes` as text, or why it is not UTF-8 (the same error `std::str::from_utf8` gives).
///
/// Inlined, with a text shorter than a word checked in line: most of a record's texts are
/// short, and in a component a call of its own and a loop over their bytes, each turn with
/// its epoch check, cost more than the check (`docs/performance.md`, "A call per
/// container, not per node").
#[inline(always)]
pub fn text(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    let ascii = if bytes.len() < 8 {
        short_word(bytes) & HIGH_BITS == 0
    } else {
        is_ascii(bytes)
    };
    if ascii {
        // SAFETY: every byte's high bit is clear: ASCII, hence UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
}

/// Whether no byte has its high bit set; stops at the first step that has one.
fn is_ascii(bytes: &[u8]) -> bool {
    let (steps, rest) = bytes.as_chunks::<32>();
    for step in steps {
        let (low, high) = Lanes::load_pair(step);
        if low.or(high).any() {
            return false;
        }
    }
    let (words, tail) = rest.as_chunks::<8>();
    let any = words.iter().fold(0, |a, w| a | u64::from_ne_bytes(*w));
    (any | short_word(tail)) & HIGH_BITS == 0
}

/// The bytes of a tail shorter than 8, little-endian in a word, zero above them: read in
/// pieces of 4, 2 and 1 bytes rather than a loop of up to seven turns, each of which would
/// pay the epoch check in a component. For scans of text a word at a time.
#[inline(always)]
pub fn short_word(tail: &[u8]) -> u64 {
    debug_assert!(tail.len() < 8);
    let (mut word, mut at) = (0, 0);
    if let Some((four, _)) = tail.split_first_chunk::<4>() {
        word = u64::from(u32::from_le_bytes(*four));
        at = 4;
    }
    if let Some((two, _)) = tail[at..].split_first_chunk::<2>() {
        word |= u64::from(u16::from_le_bytes(*two)) << (8 * at);
        at += 2;
    }
    if let Some(&one) = tail.get(at) {
        word |= u64::from(one) << (8 * at);
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts around the step's edges, with the non-ASCII part at every offset.
    #[test]
    fn agrees_with_from_utf8_at_every_offset() {
        let inserts: [&[u8]; 6] = [
            "é".as_bytes(),
            "€".as_bytes(),
            "😀".as_bytes(),
            &[0xff],
            &[0xe2, 0x82],       // a character cut short
            &[0xed, 0xa0, 0x80], // a surrogate
        ];
        for len in [0, 1, 2, 3, 4, 5, 6, 7, 8, 31, 32, 33, 63, 64, 65, 100] {
            for insert in inserts {
                for at in 0..=len {
                    let mut bytes = vec![b'x'; len];
                    bytes.splice(at..at, insert.iter().copied());
                    let want = std::str::from_utf8(&bytes);
                    assert_eq!(text(&bytes), want, "len {len}, {insert:?} at {at}");
                }
            }
            let ascii = vec![b'a'; len];
            assert_eq!(text(&ascii), std::str::from_utf8(&ascii));
        }
    }

    #[test]
    fn a_short_word_holds_each_byte_in_its_place() {
        let bytes: Vec<u8> = (1..=7).collect();
        for len in 0..8 {
            let mut want = [0u8; 8];
            want[..len].copy_from_slice(&bytes[..len]);
            assert_eq!(
                short_word(&bytes[..len]),
                u64::from_le_bytes(want),
                "len {len}"
            );
        }
    }

    #[test]
    fn an_error_points_where_from_utf8_does() {
        let mut bytes = vec![b'x'; 70];
        bytes[45] = 0xc3; // a lead byte followed by ASCII
        let err = text(&bytes).unwrap_err();
        assert_eq!(err.valid_up_to(), 45);
        assert_eq!(Some(err), std::str::from_utf8(&bytes).err());
    }
}
