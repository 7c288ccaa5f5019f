//! Payload compression (`docs/wire.md`, tags 14 `content-encoding` and 15
//! `accept-encoding`): LZ4 (the pure-Rust `lz4_flex`, block format, its decompressed size
//! first), applied by the transport on both sides so handlers and plugins only ever see
//! plain payloads.
//!
//! Negotiated so that a peer that ignores unknown tags never receives a compressed
//! payload: a side with compression configured puts `accept-encoding` on what it sends
//! (requests, responses, pongs), and a payload is compressed only towards a peer that said
//! it accepts the encoding. An old peer says nothing, so it is never sent one.
//!
//! Decompression is bounded before anything is allocated: the size a payload announces
//! must fit the frame limit and be at most [`MAX_RATIO`] times the compressed bytes;
//! anything else is a malformed payload, never an allocation bomb.

use bytes::Bytes;

use super::WireError;

/// The most a payload may grow when decompressed (LZ4's own worst case is 255:1).
pub const MAX_RATIO: usize = 255;

/// Bytes of the decompressed-size prefix.
const SIZE_PREFIX: usize = 4;

/// An encoding a payload can travel in (its code is the `content-encoding` value; its bit
/// in `accept-encoding` is `1 << (code - 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Encoding {
    Lz4 = 1,
}

impl Encoding {
    /// The encoding a manifest names (`"lz4"`); `"off"` is none.
    pub fn parse(name: &str) -> Result<Option<Encoding>, String> {
        match name {
            "off" => Ok(None),
            "lz4" => Ok(Some(Encoding::Lz4)),
            other => Err(format!("compression is \"off\" or \"lz4\" (got {other:?})")),
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8 - 1)
    }
}

/// One side's compression setting (off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compression {
    /// What this side compresses with, and accepts (none: off).
    pub encoding: Option<Encoding>,
    /// Payloads smaller than this travel as they are.
    pub min_bytes: usize,
}

impl Compression {
    /// Compression with `encoding` for payloads of at least `min_bytes`.
    pub fn new(encoding: Option<Encoding>, min_bytes: usize) -> Compression {
        Compression {
            encoding,
            min_bytes,
        }
    }

    /// The `accept-encoding` bits this side advertises (0 when off).
    pub fn accepts(&self) -> u8 {
        self.encoding.map_or(0, Encoding::bit)
    }

    /// `payload` compressed for a peer that accepts `peer_accepts`, with its
    /// `content-encoding` code; none when compression is off, the peer did not accept the
    /// encoding, the payload is under the threshold, or compressing did not make it
    /// smaller.
    pub fn compress(&self, payload: &[u8], peer_accepts: u8) -> Option<(u8, Bytes)> {
        let encoding = self.encoding?;
        if payload.len() < self.min_bytes || peer_accepts & encoding.bit() == 0 {
            return None;
        }
        let packed = match encoding {
            Encoding::Lz4 => lz4_flex::block::compress_prepend_size(payload),
        };
        (packed.len() < payload.len()).then(|| (encoding as u8, Bytes::from(packed)))
    }
}

/// The plain payload of one that travelled with `content-encoding` `code`, at most `max`
/// bytes and [`MAX_RATIO`] times its compressed size.
pub fn decompress(code: u8, payload: &[u8], max: usize) -> Result<Bytes, WireError> {
    if code != Encoding::Lz4 as u8 {
        return Err(WireError::Malformed(format!(
            "unknown content-encoding {code}"
        )));
    }
    let Some((prefix, body)) = payload.split_first_chunk::<SIZE_PREFIX>() else {
        return Err(WireError::Malformed(
            "a compressed payload shorter than its size".into(),
        ));
    };
    let size = u32::from_le_bytes(*prefix) as usize;
    let cap = max.min(payload.len().saturating_mul(MAX_RATIO));
    if size > cap {
        return Err(WireError::Malformed(format!(
            "a compressed payload of {} bytes claims {size} bytes decompressed (at most {cap}: \
             the frame limit and {MAX_RATIO}:1)",
            payload.len()
        )));
    }
    let plain = lz4_flex::block::decompress(body, size)
        .map_err(|e| WireError::Malformed(format!("a compressed payload is corrupt: {e}")))?;
    if plain.len() != size {
        return Err(WireError::Malformed(format!(
            "a compressed payload decompressed to {} bytes, announced {size}",
            plain.len()
        )));
    }
    Ok(Bytes::from(plain))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LZ4: Compression = Compression {
        encoding: Some(Encoding::Lz4),
        min_bytes: 1024,
    };

    #[test]
    fn a_payload_round_trips_and_shrinks() {
        let payload: Vec<u8> = b"axle ".iter().copied().cycle().take(64 << 10).collect();
        let (code, packed) = LZ4.compress(&payload, LZ4.accepts()).expect("compressed");
        assert!(packed.len() < payload.len() / 10, "{} bytes", packed.len());
        let plain = decompress(code, &packed, 16 << 20).unwrap();
        assert_eq!(&plain[..], &payload[..]);
    }

    #[test]
    fn only_above_the_threshold_towards_a_peer_that_accepts_and_when_smaller() {
        let small = vec![0u8; 1023];
        assert!(
            LZ4.compress(&small, LZ4.accepts()).is_none(),
            "under the threshold"
        );
        let big = vec![0u8; 4096];
        assert!(LZ4.compress(&big, 0).is_none(), "a peer that said nothing");
        let off = Compression::default();
        assert_eq!(off.accepts(), 0);
        assert!(off.compress(&big, 0xff).is_none(), "off");
        // Random bytes do not shrink: they travel as they are.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(LZ4.compress(&noise, LZ4.accepts()).is_none());
    }

    #[test]
    fn a_bomb_is_refused_before_anything_is_allocated() {
        // A few bytes claiming 4 GiB.
        let bomb = [0xff, 0xff, 0xff, 0xff, 0x00];
        let e = decompress(1, &bomb, 16 << 20).unwrap_err().to_string();
        assert!(e.contains("claims"), "{e}");
        // Within the frame limit but past 255:1: 14 bytes claiming 100,000.
        let mut ratio = 100_000u32.to_le_bytes().to_vec();
        ratio.extend_from_slice(&[0x1f, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        let e = decompress(1, &ratio, 16 << 20).unwrap_err().to_string();
        assert!(e.contains("255:1"), "{e}");
        // What LZ4 really makes stays within the ratio (a megabyte of zeros).
        let zeros = vec![0u8; 1 << 20];
        let (code, packed) = LZ4.compress(&zeros, LZ4.accepts()).unwrap();
        assert_eq!(
            decompress(code, &packed, 16 << 20).unwrap().len(),
            zeros.len()
        );
        // Past the frame limit.
        let text: Vec<u8> = b"0123456789".iter().copied().cycle().take(8192).collect();
        let (code, packed) = LZ4.compress(&text, LZ4.accepts()).unwrap();
        assert!(decompress(code, &packed, 4096).is_err());
        assert!(decompress(code, &packed, 8192).is_ok());
    }

    #[test]
    fn corrupt_or_unknown_input_is_an_error() {
        assert!(
            decompress(1, &[1, 2], 1024).is_err(),
            "no room for the size"
        );
        assert!(decompress(7, &[0; 16], 1024).is_err(), "unknown encoding");
        let text: Vec<u8> = b"abc".iter().copied().cycle().take(4096).collect();
        let (code, packed) = LZ4.compress(&text, LZ4.accepts()).unwrap();
        let mut cut = packed.to_vec();
        cut.truncate(cut.len() - 3);
        assert!(decompress(code, &cut, 1 << 20).is_err());
    }

    #[test]
    fn names_parse() {
        assert_eq!(Encoding::parse("lz4"), Ok(Some(Encoding::Lz4)));
        assert_eq!(Encoding::parse("off"), Ok(None));
        assert!(Encoding::parse("gzip").is_err());
    }
}
