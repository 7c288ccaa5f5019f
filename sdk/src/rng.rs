//! A small, fast, seedable generator (SplitMix64) so that plugins are reproducible in
//! tests (`seed` in the config) and need no WASI randomness.

/// SplitMix64: passes BigCrush, one multiply-xorshift chain per number.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator with a fixed seed.
    pub fn seeded(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// Seeded from config key `seed` when present (reproducible), else from the host.
    pub fn from_config(config: &crate::Config) -> Result<Self, String> {
        match config.get("seed") {
            Some(_) => Ok(Rng::seeded(config.u64_or("seed", 0)?)),
            None => Ok(Rng::seeded(crate::host::random())),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `0..n` (`n > 0`), without modulo bias worth measuring
    /// (Lemire's multiply-shift). Below 2^32 from 32 random bits and one 64-bit multiply:
    /// a 128-bit product is a library call in wasm32, a noticeable share of a `random`
    /// pick.
    pub fn below(&mut self, n: u64) -> u64 {
        let random = self.next_u64();
        match u32::try_from(n) {
            Ok(n) => ((random >> 32) * u64::from(n)) >> 32,
            Err(_) => ((u128::from(random) * u128::from(n)) >> 64) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_roughly_uniform() {
        let mut rng = Rng::seeded(7);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[rng.below(4) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }
}
