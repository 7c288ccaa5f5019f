//! One key's sliding window: two fixed windows' counts, interpolated.

use crate::Limit;
use axle_limiter_rates::retry_after_ms;

/// The counts of the current fixed window and the one before it.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    limit: Limit,
    /// Where the current fixed window started (host nanoseconds).
    start_ns: u64,
    current: f64,
    previous: f64,
}

impl Window {
    /// An empty window starting at `now_ns`.
    pub fn new(limit: Limit, now_ns: u64) -> Self {
        Window {
            limit,
            start_ns: now_ns,
            current: 0.0,
            previous: 0.0,
        }
    }

    /// Moves the fixed windows forward to the one holding `now_ns`. A gap of a whole
    /// window or more leaves nothing to carry.
    fn roll(&mut self, now_ns: u64) {
        let w = self.limit.window_ns;
        let passed = now_ns.saturating_sub(self.start_ns) / w;
        if passed == 0 {
            return;
        }
        self.previous = if passed == 1 { self.current } else { 0.0 };
        self.current = 0.0;
        self.start_ns += passed * w;
    }

    /// Requests counted in the window ending at `now_ns` (after [`Window::roll`]): the
    /// current window's, plus the share of the previous one still inside the window.
    fn count(&self, now_ns: u64) -> f64 {
        let w = self.limit.window_ns as f64;
        let into = now_ns.saturating_sub(self.start_ns) as f64;
        self.previous * ((w - into) / w) + self.current
    }

    /// Counts `permits` if the window has room for them; otherwise the milliseconds until
    /// it will (at least 1).
    pub fn take(&mut self, now_ns: u64, permits: u32) -> Result<(), u32> {
        self.roll(now_ns);
        let want = f64::from(permits);
        let allowed = self.limit.per_window();
        if self.count(now_ns) + want <= allowed + 1e-9 {
            self.current += want;
            return Ok(());
        }
        Err(self.retry_after_ms(now_ns, want, allowed))
    }

    /// When the window will have room for `want`: as the previous window's share fades
    /// if the current window alone leaves room, else once the current window is the
    /// previous one and has faded enough.
    fn retry_after_ms(&self, now_ns: u64, want: f64, allowed: f64) -> u32 {
        let w = self.limit.window_ns as f64;
        let left_in_current = w - now_ns.saturating_sub(self.start_ns) as f64;
        let wait_ns = if self.current + want <= allowed {
            // previous × (left − t) / w ≤ allowed − current − want
            let room = allowed - self.current - want;
            left_in_current - room * w / self.previous.max(f64::MIN_POSITIVE)
        } else if want > allowed {
            // Never fits: a window from now is as good an answer as any.
            w
        } else {
            // In the next window: current × (w − t) / w + want ≤ allowed.
            let fade = w - (allowed - want) * w / self.current.max(f64::MIN_POSITIVE);
            left_in_current + fade.max(0.0)
        };
        retry_after_ms(wait_ns.max(0.0) / 1e6)
    }

    /// The hand-off bytes: where the current window started and both counts.
    pub fn save(&self) -> Vec<u8> {
        let mut out = self.start_ns.to_le_bytes().to_vec();
        out.extend_from_slice(&self.current.to_le_bytes());
        out.extend_from_slice(&self.previous.to_le_bytes());
        out
    }

    /// Takes the counts [`Window::save`] wrote (keeping this window's limit); `None` for
    /// bytes it did not write.
    pub fn restore(&mut self, saved: &[u8], now_ns: u64) -> Option<()> {
        let start_ns = u64::from_le_bytes(saved.get(..8)?.try_into().ok()?);
        let current = f64::from_le_bytes(saved.get(8..16)?.try_into().ok()?);
        let previous = f64::from_le_bytes(saved.get(16..24)?.try_into().ok()?);
        if !(current.is_finite() && previous.is_finite() && current >= 0.0 && previous >= 0.0) {
            return None;
        }
        self.start_ns = start_ns.min(now_ns);
        self.current = current;
        self.previous = previous;
        Some(())
    }
}
