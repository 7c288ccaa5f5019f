//! Bytes appended to a buffer, a short run written in line in a component.
//!
//! Why: in a WebAssembly guest, a copy whose length is known only at run time is a
//! `memory.copy`, which wasmtime runs as a call out of the guest into the host (a
//! transition and an indirect call) whatever the length; a copy of a constant length up to
//! 128 bytes it writes in line. A serializer's texts are mostly short (a record's names and
//! values), and each paid that call for a few bytes (`docs/performance.md`, "Short copies
//! in line"). Here a run of up to [`SHORT`] bytes is copied in pieces of constant length, no
//! loop (each turn of one would pay the epoch check); a longer one still goes to
//! `extend_from_slice`, whose one call its length amortises. Native code always takes
//! `extend_from_slice`: its `memcpy` is a plain call.

/// The longest run copied in line in a component.
pub const SHORT: usize = 32;

/// Appends `src` to `out`.
#[inline(always)]
pub fn extend(out: &mut Vec<u8>, src: &[u8]) {
    if cfg!(target_family = "wasm") && src.len() <= SHORT {
        extend_short(out, src);
    } else {
        out.extend_from_slice(src);
    }
}

/// Appends `src`, at most [`SHORT`] bytes, by constant-length copies: words at 0, 8 and 16
/// as far as the run reaches past them, then its last word, which may overlap the one
/// before; a run under 8 bytes by two overlapping halves of 4, or its first, middle and
/// last byte.
#[inline(always)]
fn extend_short(out: &mut Vec<u8>, src: &[u8]) {
    let n = src.len();
    debug_assert!(n <= SHORT);
    out.reserve(n);
    let start = out.len();
    let s = src.as_ptr();
    // SAFETY: `reserve` left room for `n` bytes past `start`. Every copy reads
    // `width` bytes at an offset `at` with `at + width <= n` from `src`, and writes them at
    // the same offset past `start`; together the copies cover `0..n`, so every byte up to
    // the new length is written before `set_len`.
    unsafe {
        let d = out.as_mut_ptr().add(start);
        let copy =
            |at: usize, width: usize| std::ptr::copy_nonoverlapping(s.add(at), d.add(at), width);
        if n >= 8 {
            copy(0, 8);
            if n > 16 {
                copy(8, 8);
            }
            if n > 24 {
                copy(16, 8);
            }
            copy(n - 8, 8);
        } else if n >= 4 {
            copy(0, 4);
            copy(n - 4, 4);
        } else if n > 0 {
            copy(0, 1);
            copy(n / 2, 1);
            copy(n - 1, 1);
        }
        out.set_len(start + n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length up to past [`SHORT`], after prefixes of every alignment: the bytes
    /// appended are the run's, and nothing before them changes.
    #[test]
    fn appends_every_short_length_exactly() {
        let run: Vec<u8> = (1..=SHORT as u8 + 8).collect();
        for before in 0..9 {
            for n in 0..run.len() {
                let mut out: Vec<u8> = vec![0xee; before];
                extend_short_or_long(&mut out, &run[..n]);
                assert_eq!(&out[..before], &vec![0xee; before][..]);
                assert_eq!(&out[before..], &run[..n], "{before} before, {n} appended");
            }
        }
    }

    /// The in-line path, whatever the target the test runs on.
    fn extend_short_or_long(out: &mut Vec<u8>, src: &[u8]) {
        if src.len() <= SHORT {
            extend_short(out, src);
        } else {
            extend(out, src);
        }
    }
}
