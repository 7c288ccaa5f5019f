//! UTF-8 validation that passes ASCII 32 bytes at a time.
//!
//! Why: every text of a packed value is checked on both sides of the boundary, and a
//! serializer's texts are mostly ASCII. `core::str::from_utf8` skips ASCII a machine word
//! at a time, and a WebAssembly guest's word is 4 bytes: in a component its check of a
//! 1 KiB text was an eighth of a MessagePack encode (`docs/performance.md`,
//! "Serializers"). Here ASCII is tested with 64-bit loads, which a wasm32 guest has
//! natively; a text with any other byte goes to `from_utf8` whole.

/// Every byte of an ASCII chunk has its high bit clear.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Bytes tested per step: four 64-bit words, OR-ed together.
const STEP: usize = 32;

/// `bytes` as text, or why it is not UTF-8 (the same error `std::str::from_utf8` gives).
pub fn text(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    if is_ascii(bytes) {
        // SAFETY: every byte's high bit is clear: ASCII, hence UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
}

/// Whether no byte has its high bit set; stops at the first step that has one.
fn is_ascii(bytes: &[u8]) -> bool {
    let (steps, rest) = bytes.as_chunks::<STEP>();
    for step in steps {
        let mut any = 0;
        for word in step.as_chunks::<8>().0 {
            any |= u64::from_ne_bytes(*word);
        }
        if any & HIGH_BITS != 0 {
            return false;
        }
    }
    let (words, tail) = rest.as_chunks::<8>();
    let any = words.iter().fold(0, |a, w| a | u64::from_ne_bytes(*w));
    let any = tail.iter().fold(any, |a, b| a | u64::from(*b));
    any & HIGH_BITS == 0
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
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 100] {
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
    fn an_error_points_where_from_utf8_does() {
        let mut bytes = vec![b'x'; 70];
        bytes[45] = 0xc3; // a lead byte followed by ASCII
        let err = text(&bytes).unwrap_err();
        assert_eq!(err.valid_up_to(), 45);
        assert_eq!(Some(err), std::str::from_utf8(&bytes).err());
    }
}
