//! MessagePack's markers written by hand, each in the smallest form, as `rmp::encode`
//! writes them (the tests hold the two to the same bytes).
//!
//! Why not `rmp::encode`: its writers go through `io::Write`, and each calls
//! `Marker::to_u8`, a match over every marker that stays a call of its own even under LTO.
//! In a component a call pays a stack check, the epoch check and saved registers; on a
//! record of twenty fields that call alone was 4.5–9% of an encode (`docs/performance.md`,
//! "A call per container, not per node"). Decoding still reads markers with `rmp::Marker`.

/// `nil`.
pub fn nil(out: &mut Vec<u8>) {
    out.push(0xc0);
}

/// `true` or `false`.
pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.push(if b { 0xc3 } else { 0xc2 });
}

/// A signed integer: a non-negative one as an unsigned integer, as `rmp` writes it.
pub fn signed(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        return unsigned(out, i as u64);
    }
    if i >= -32 {
        out.push(i as u8); // negative fixint: the byte is the value
    } else if i >= i64::from(i8::MIN) {
        out.extend_from_slice(&[0xd0, i as u8]);
    } else if i >= i64::from(i16::MIN) {
        marked(out, 0xd1, &(i as i16).to_be_bytes());
    } else if i >= i64::from(i32::MIN) {
        marked(out, 0xd2, &(i as i32).to_be_bytes());
    } else {
        marked(out, 0xd3, &i.to_be_bytes());
    }
}

/// An unsigned integer in the smallest of positive fixint, `uint 8/16/32/64`.
pub fn unsigned(out: &mut Vec<u8>, u: u64) {
    if u < 128 {
        out.push(u as u8);
    } else if u <= u64::from(u8::MAX) {
        out.extend_from_slice(&[0xcc, u as u8]);
    } else if u <= u64::from(u16::MAX) {
        marked(out, 0xcd, &(u as u16).to_be_bytes());
    } else if u <= u64::from(u32::MAX) {
        marked(out, 0xce, &(u as u32).to_be_bytes());
    } else {
        marked(out, 0xcf, &u.to_be_bytes());
    }
}

/// A float, always as `float 64`: the value model's floats are 64-bit.
pub fn float(out: &mut Vec<u8>, f: f64) {
    marked(out, 0xcb, &f.to_be_bytes());
}

/// A string: fixstr, `str 8/16/32`, then its bytes.
pub fn str(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else {
        sized(out, Some(0xd9), 0xda, 0xdb, n);
    }
    axle_sdk::copy::extend(out, s.as_bytes());
}

/// A byte string: `bin 8/16/32`, then its bytes.
pub fn bin(out: &mut Vec<u8>, b: &[u8]) {
    sized(out, Some(0xc4), 0xc5, 0xc6, b.len());
    axle_sdk::copy::extend(out, b);
}

/// An array's header: fixarray or `array 16/32`.
pub fn array(out: &mut Vec<u8>, n: u32) {
    if n < 16 {
        out.push(0x90 | n as u8);
    } else {
        sized(out, None, 0xdc, 0xdd, n as usize);
    }
}

/// A map's header: fixmap or `map 16/32`.
pub fn map(out: &mut Vec<u8>, n: u32) {
    if n < 16 {
        out.push(0x80 | n as u8);
    } else {
        sized(out, None, 0xde, 0xdf, n as usize);
    }
}

/// A marker and its big-endian payload.
#[inline(always)]
fn marked(out: &mut Vec<u8>, marker: u8, payload: &[u8]) {
    out.push(marker);
    out.extend_from_slice(payload);
}

/// A length in the smallest of a family's 8-, 16- and 32-bit forms (arrays and maps have
/// no 8-bit form). The packed reader has already refused a length over 4 GiB.
#[inline(always)]
fn sized(out: &mut Vec<u8>, m8: Option<u8>, m16: u8, m32: u8, n: usize) {
    if let (Some(m8), true) = (m8, n <= usize::from(u8::MAX)) {
        out.extend_from_slice(&[m8, n as u8]);
    } else if n <= usize::from(u16::MAX) {
        marked(out, m16, &(n as u16).to_be_bytes());
    } else {
        marked(out, m32, &(n as u32).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmp::encode as mp;

    /// Integers at every edge between two forms, and a step on each side of it.
    fn edges() -> Vec<i128> {
        let mut at: Vec<i128> = vec![0, 1, -1];
        for edge in [
            32,
            128,
            256,
            1 << 15,
            1 << 16,
            1 << 31,
            1 << 32,
            1 << 63,
            1 << 64,
        ] {
            for e in [edge, -edge] {
                at.extend([e - 1, e, e + 1]);
            }
        }
        at
    }

    fn ours(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out);
        out
    }

    #[test]
    fn integers_take_rmps_form() {
        for n in edges() {
            if let Ok(i) = i64::try_from(n) {
                let mut want = Vec::new();
                mp::write_sint(&mut want, i).unwrap();
                assert_eq!(ours(|o| signed(o, i)), want, "signed {i}");
            }
            if let Ok(u) = u64::try_from(n) {
                let mut want = Vec::new();
                mp::write_uint(&mut want, u).unwrap();
                assert_eq!(ours(|o| unsigned(o, u)), want, "unsigned {u}");
            }
        }
    }

    #[test]
    fn scalars_take_rmps_form() {
        let mut want = Vec::new();
        mp::write_nil(&mut want).unwrap();
        mp::write_bool(&mut want, true).unwrap();
        mp::write_bool(&mut want, false).unwrap();
        for f in [0.0, -0.0, 1.5, f64::MAX, f64::NAN, f64::INFINITY] {
            mp::write_f64(&mut want, f).unwrap();
        }
        let got = ours(|o| {
            nil(o);
            boolean(o, true);
            boolean(o, false);
            for f in [0.0, -0.0, 1.5, f64::MAX, f64::NAN, f64::INFINITY] {
                float(o, f);
            }
        });
        assert_eq!(got, want);
    }

    #[test]
    fn lengths_take_rmps_form() {
        for n in [0, 1, 15, 16, 31, 32, 255, 256, 65_535, 65_536, 70_000] {
            let text = "x".repeat(n);
            let mut want = Vec::new();
            mp::write_str(&mut want, &text).unwrap();
            assert_eq!(ours(|o| str(o, &text)), want, "str of {n}");

            let mut want = Vec::new();
            mp::write_bin(&mut want, text.as_bytes()).unwrap();
            assert_eq!(ours(|o| bin(o, text.as_bytes())), want, "bin of {n}");

            let mut want = Vec::new();
            mp::write_array_len(&mut want, n as u32).unwrap();
            assert_eq!(ours(|o| array(o, n as u32)), want, "array of {n}");

            let mut want = Vec::new();
            mp::write_map_len(&mut want, n as u32).unwrap();
            assert_eq!(ours(|o| map(o, n as u32)), want, "map of {n}");
        }
        for n in [u32::MAX - 1, u32::MAX] {
            let mut want = Vec::new();
            mp::write_map_len(&mut want, n).unwrap();
            assert_eq!(ours(|o| map(o, n)), want, "map of {n}");
        }
    }
}
