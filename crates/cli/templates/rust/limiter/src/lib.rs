//! `{{name}}`: a fixed-window limiter. Each key may take `permits` units per window of
//! `window-ms` milliseconds; a request over the limit is refused with the time left until
//! the window turns. Time comes from the kernel: `acquire` is given its clock, and
//! `prepare` reads the same clock through `host::now_ns`; a plugin has no other.
//!
//! Config (defaults in brackets): `permits` [100], `window-ms` [1000], both at least 1.

use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter};

/// The limiter: the same limit for every key.
pub struct FixedWindow {
    permits: u64,
    window_ns: u64,
}

/// One key's window.
pub struct Window {
    start_ns: u64,
    used: u64,
}

impl Limiter for FixedWindow {
    type KeyState = Window;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["permits", "window-ms"])?;
        let permits = config.u64_or("permits", 100)?;
        let window_ms = config.u64_or("window-ms", 1000)?;
        if permits == 0 {
            return Err("key `permits`: must be at least 1".to_string());
        }
        if window_ms == 0 || window_ms > u64::from(u32::MAX) {
            return Err("key `window-ms`: must be between 1 and 4294967295".to_string());
        }
        Ok(FixedWindow {
            permits,
            window_ns: window_ms * 1_000_000,
        })
    }

    fn prepare(&mut self, _attributes: &LimitKey) -> Window {
        Window {
            start_ns: host::now_ns(),
            used: 0,
        }
    }

    fn acquire(&mut self, key: &mut KeyEntry<Window>, permits: u32, now: u64) -> Admission {
        let w = &mut key.state;
        if now.saturating_sub(w.start_ns) >= self.window_ns {
            w.start_ns = now;
            w.used = 0;
        }
        if w.used + u64::from(permits) <= self.permits {
            w.used += u64::from(permits);
            return Admission::Admit;
        }
        let left_ns = (w.start_ns + self.window_ns).saturating_sub(now);
        let retry_after_ms = left_ns.div_ceil(1_000_000).clamp(1, u64::from(u32::MAX)) as u32;
        Admission::Reject { retry_after_ms }
    }
}

axle_sdk::export_limiter!(FixedWindow);
