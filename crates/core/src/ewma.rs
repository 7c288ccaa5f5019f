//! The one exponentially weighted moving average of the kernel: per-endpoint latency
//! (facts) and per-method handler latency (server stats) both use it, so an "EWMA" reads
//! the same everywhere. The newest sample weighs 1/8, as TCP's smoothed round-trip time.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::striped::Writers;

/// Weight of the newest sample, as a shift (1/2^3 = 1/8).
const SHIFT: u32 = 3;

/// The average after `sample`, given the previous average `old` (0: no sample yet, so the
/// first sample is taken as it is; never 0 afterwards, so "no sample" stays visible).
pub fn next(old: u64, sample: u64) -> u64 {
    if old == 0 {
        sample.max(1)
    } else {
        old - (old >> SHIFT) + (sample >> SHIFT)
    }
}

/// An EWMA updated without a lock (one compare-and-swap per sample).
#[derive(Debug, Default)]
pub struct AtomicEwma(AtomicU64);

impl AtomicEwma {
    /// Folds in one sample.
    pub fn record(&self, sample: u64) {
        self.record_by(sample, Writers::Many);
    }

    /// Folds in one sample, written by `writers`: one thread alone needs no
    /// compare-and-swap (`crate::striped`).
    #[inline]
    pub fn record_by(&self, sample: u64, writers: Writers) {
        match writers {
            Writers::One => self.0.store(next(self.0.load(Relaxed), sample), Relaxed),
            Writers::Many => {
                let _ = self
                    .0
                    .fetch_update(Relaxed, Relaxed, |old| Some(next(old, sample)));
            }
        }
    }

    /// Sets the average (one made from others', say).
    pub fn set(&self, average: u64) {
        self.0.store(average, Relaxed);
    }

    /// Forgets every sample.
    pub fn reset(&self) {
        self.0.store(0, Relaxed);
    }

    /// The current average (0: no sample yet).
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sample_is_taken_whole_then_each_weighs_an_eighth() {
        let e = AtomicEwma::default();
        assert_eq!(e.get(), 0);
        e.record(8_000);
        assert_eq!(e.get(), 8_000);
        e.record(16_000);
        assert_eq!(e.get(), 8_000 - 1_000 + 2_000);
        let fresh = AtomicEwma::default();
        fresh.record(0);
        assert_eq!(fresh.get(), 1, "a zero sample still marks that one arrived");
    }
}
