//! The kernel clock: monotonic nanoseconds since the process started. Facts, health,
//! transports and plugins (`host.now-ns`) all read this one clock, so their times compare.

use std::sync::OnceLock;
use std::time::Instant;

/// Monotonic nanoseconds since the kernel started: the clock plugins see.
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_never_goes_back() {
        let a = super::now_ns();
        let b = super::now_ns();
        assert!(b >= a);
    }
}
