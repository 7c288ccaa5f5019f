//! Sixteen bytes tested at once: in the vector unit where the target has one, in two
//! 64-bit words where it does not.
//!
//! Why: a serializer looks at every byte of its texts (each text's UTF-8 check, JSON's
//! escapes), and a text is most of a payload. A WebAssembly guest built with `simd128`
//! (this workspace builds every plugin so: `.cargo/config.toml`) runs these steps as the
//! machine's own vector instructions, and x86_64 always has SSE2, so the kernel and the
//! plugins' native twins take the same 16-byte steps: a twin measured beside its component
//! compares the boundary and the two compilers, not two algorithms (`docs/performance.md`,
//! "Texts scanned 16 bytes an instruction").
//!
//! A lane is *marked* when its high bit is set: a loaded lane when its byte is not ASCII,
//! a comparison's lane when it matched. In the two-word fallback a comparison may also
//! mark a lane above a marked one of the same word (a borrow carries up), never one
//! below: so [`Lanes::any`] and the lowest bit of [`Lanes::marks`] are exact everywhere,
//! and they are all a scan should read.

/// Sixteen bytes, or what a comparison made of them.
#[derive(Clone, Copy)]
pub struct Lanes(Imp);

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
type Imp = simd128::Vector;
#[cfg(target_arch = "x86_64")]
type Imp = sse2::Vector;
#[cfg(not(any(
    all(target_arch = "wasm32", target_feature = "simd128"),
    target_arch = "x86_64"
)))]
type Imp = swar::Words;

impl Lanes {
    /// The two halves of a 32-byte block: a scan's step, so a loop pays its turn's
    /// overhead (in a component, an epoch check) once per 32 bytes.
    #[inline(always)]
    pub fn load_pair(block: &[u8; 32]) -> (Lanes, Lanes) {
        let (low, high) = block.split_at(16);
        (
            Lanes::load(low.try_into().expect("16 of 32")),
            Lanes::load(high.try_into().expect("16 of 32")),
        )
    }

    /// Sixteen bytes, lane `i` holding `bytes[i]`.
    #[inline(always)]
    pub fn load(bytes: &[u8; 16]) -> Lanes {
        Lanes(Imp::load(bytes))
    }

    /// Whether any lane is marked.
    #[inline(always)]
    pub fn any(self) -> bool {
        self.0.any()
    }

    /// Bit `i` set when lane `i` is marked (above the lowest, see the module's note).
    #[inline(always)]
    pub fn marks(self) -> u32 {
        self.0.marks()
    }

    /// The lanes marked in either.
    #[inline(always)]
    pub fn or(self, other: Lanes) -> Lanes {
        Lanes(self.0.or(other.0))
    }

    /// The lanes whose byte is `b`.
    #[inline(always)]
    pub fn eq(self, b: u8) -> Lanes {
        Lanes(self.0.eq(b))
    }

    /// The lanes whose byte is less than `b`, for `b` in `1..=0x80` (the two-word form's
    /// arithmetic holds only there; the scans ask for control bytes, below 0x20).
    #[inline(always)]
    pub fn below(self, b: u8) -> Lanes {
        debug_assert!((1..=0x80).contains(&b));
        Lanes(self.0.below(b))
    }
}

/// WebAssembly's 128-bit vectors, which wasmtime compiles to the host's own.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use core::arch::wasm32::*;

    #[derive(Clone, Copy)]
    pub struct Vector(v128);

    impl Vector {
        #[inline(always)]
        pub fn load(bytes: &[u8; 16]) -> Vector {
            // SAFETY: `v128_load` reads 16 bytes, which `bytes` has, at any alignment.
            Vector(unsafe { v128_load(bytes.as_ptr().cast()) })
        }
        #[inline(always)]
        pub fn any(self) -> bool {
            self.marks() != 0
        }
        #[inline(always)]
        pub fn marks(self) -> u32 {
            u32::from(i8x16_bitmask(self.0))
        }
        #[inline(always)]
        pub fn or(self, other: Vector) -> Vector {
            Vector(v128_or(self.0, other.0))
        }
        #[inline(always)]
        pub fn eq(self, b: u8) -> Vector {
            Vector(i8x16_eq(self.0, u8x16_splat(b)))
        }
        #[inline(always)]
        pub fn below(self, b: u8) -> Vector {
            Vector(u8x16_lt(self.0, u8x16_splat(b)))
        }
    }
}

/// SSE2, which every x86_64 has.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use core::arch::x86_64::*;

    // SAFETY (every `unsafe` below but the load's): an SSE2 intrinsic is unsafe to call
    // outside a `#[target_feature(enable = "sse2")]` function, and SSE2 is part of
    // x86_64's baseline: there is no x86_64 without it.

    #[derive(Clone, Copy)]
    pub struct Vector(__m128i);

    impl Vector {
        #[inline(always)]
        pub fn load(bytes: &[u8; 16]) -> Vector {
            // SAFETY: `_mm_loadu_si128` reads 16 bytes, which `bytes` has, at any alignment.
            Vector(unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) })
        }
        #[inline(always)]
        pub fn any(self) -> bool {
            self.marks() != 0
        }
        #[inline(always)]
        pub fn marks(self) -> u32 {
            unsafe { _mm_movemask_epi8(self.0) as u32 }
        }
        #[inline(always)]
        pub fn or(self, other: Vector) -> Vector {
            Vector(unsafe { _mm_or_si128(self.0, other.0) })
        }
        #[inline(always)]
        pub fn eq(self, b: u8) -> Vector {
            Vector(unsafe { _mm_cmpeq_epi8(self.0, _mm_set1_epi8(b as i8)) })
        }
        /// SSE2 compares bytes as signed only: a byte is below `b` when the larger of it
        /// and `b - 1` is `b - 1`.
        #[inline(always)]
        pub fn below(self, b: u8) -> Vector {
            unsafe {
                let top = _mm_set1_epi8((b - 1) as i8);
                Vector(_mm_cmpeq_epi8(_mm_max_epu8(self.0, top), top))
            }
        }
    }
}

/// The fallback: two little-endian words, only each byte's high bit meaningful. Built on
/// every target so its tests run everywhere.
#[cfg_attr(
    any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    ),
    allow(dead_code)
)]
mod swar {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;

    #[derive(Clone, Copy)]
    pub struct Words([u64; 2]);

    impl Words {
        #[inline(always)]
        pub fn load(bytes: &[u8; 16]) -> Words {
            let (low, high) = bytes.split_at(8);
            Words([
                u64::from_le_bytes(low.try_into().expect("8 of 16")),
                u64::from_le_bytes(high.try_into().expect("8 of 16")),
            ])
        }

        #[inline(always)]
        pub fn any(self) -> bool {
            (self.0[0] | self.0[1]) & HIGH != 0
        }

        #[inline(always)]
        pub fn marks(self) -> u32 {
            // Each byte's high bit moved to its lowest, then gathered into the top byte
            // by one multiply: byte i's bit lands on bit 56 + i, no two products overlap.
            let gather = |w: u64| ((w & HIGH) >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
            (gather(self.0[0]) | gather(self.0[1]) << 8) as u32
        }

        #[inline(always)]
        pub fn or(self, other: Words) -> Words {
            Words([self.0[0] | other.0[0], self.0[1] | other.0[1]])
        }

        #[inline(always)]
        pub fn eq(self, b: u8) -> Words {
            // A byte of `x` is zero where `w` holds `b`; `x - 1` borrows through it.
            self.map(|w| {
                let x = w ^ (ONES * u64::from(b));
                x.wrapping_sub(ONES) & !x
            })
        }

        #[inline(always)]
        pub fn below(self, b: u8) -> Words {
            // A byte under `b` borrows and sets its high bit; one with its high bit set
            // already is no match, and `!w` clears it.
            self.map(|w| w.wrapping_sub(ONES * u64::from(b)) & !w)
        }

        #[inline(always)]
        fn map(self, f: impl Fn(u64) -> u64) -> Words {
            Words([f(self.0[0]), f(self.0[1])])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERESTING: [u8; 12] = [
        0x00, 0x01, 0x1f, 0x20, 0x21, b'"', b'\\', 0x7e, 0x7f, 0x80, 0xc3, 0xff,
    ];

    /// Every pair of interesting bytes at every pair of lanes, against a byte loop: the
    /// lowest mark and `any` of each operation, in the lanes this target uses and in the
    /// two-word fallback.
    #[test]
    fn the_lowest_mark_and_any_agree_with_a_byte_loop() {
        type Op = (
            &'static str,
            fn(Lanes) -> Lanes,
            fn(swar::Words) -> swar::Words,
            fn(u8) -> bool,
        );
        let ops: [Op; 5] = [
            ("load", |l| l, |w| w, |b| b >= 0x80),
            ("eq quote", |l| l.eq(b'"'), |w| w.eq(b'"'), |b| b == b'"'),
            ("eq zero", |l| l.eq(0), |w| w.eq(0), |b| b == 0),
            (
                "below space",
                |l| l.below(0x20),
                |w| w.below(0x20),
                |b| b < 0x20,
            ),
            (
                "below 0x80",
                |l| l.below(0x80),
                |w| w.below(0x80),
                |b| b < 0x80,
            ),
        ];
        for (name, lanes_op, words_op, want) in ops {
            for &x in &INTERESTING {
                for &y in &INTERESTING {
                    for i in 0..16 {
                        for j in 0..16 {
                            let mut bytes = [b'a'; 16];
                            bytes[i] = x;
                            bytes[j] = y;
                            let first = bytes.iter().position(|&b| want(b));
                            let lowest =
                                |marks: u32| (marks != 0).then(|| marks.trailing_zeros() as usize);
                            let l = lanes_op(Lanes::load(&bytes));
                            assert_eq!(lowest(l.marks()), first, "{name} {bytes:?}");
                            assert_eq!(l.any(), first.is_some(), "{name} {bytes:?}");
                            let w = words_op(swar::Words::load(&bytes));
                            assert_eq!(lowest(w.marks()), first, "{name} two words {bytes:?}");
                            assert_eq!(w.any(), first.is_some(), "{name} two words {bytes:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn or_marks_either_and_a_pair_is_the_blocks_two_halves() {
        let mut block = [b'a'; 32];
        block[3] = b'"';
        block[20] = 0x01;
        let (low, high) = Lanes::load_pair(&block);
        assert_eq!(low.eq(b'"').marks().trailing_zeros(), 3);
        assert_eq!(high.below(0x20).marks().trailing_zeros(), 4);
        let both = low.eq(b'"').or(low.below(0x20));
        assert!(both.any());
        assert!(!high.eq(b'"').or(low.below(0x20)).any());
    }
}
