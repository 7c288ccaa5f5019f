//! One key's token bucket: the tokens left and when they were counted. The limit is the
//! caller's to pass on each call, so a limiter whose limit moves (a cluster share that
//! follows the provider count) keeps one bucket.

use crate::{retry_after_ms, Limit};
use axle_sdk::Admission;

/// Tokens left and the host time (nanoseconds) they were counted at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tokens {
    pub tokens: f64,
    pub updated_ns: u64,
}

impl Tokens {
    /// A bucket holding its whole burst at `now_ns`.
    pub fn full(limit: Limit, now_ns: u64) -> Self {
        Tokens {
            tokens: limit.burst,
            updated_ns: now_ns,
        }
    }

    /// Refills for the time since the last count, then takes `permits` (at least 1) or
    /// rejects with the time until that many are back.
    pub fn take(&mut self, limit: Limit, now_ns: u64, permits: u32) -> Admission {
        let elapsed_s = now_ns.saturating_sub(self.updated_ns) as f64 / 1e9;
        self.tokens = (self.tokens + elapsed_s * limit.per_second).min(limit.burst);
        self.updated_ns = now_ns;
        let want = f64::from(permits.max(1));
        if self.tokens >= want {
            self.tokens -= want;
            Admission::Admit
        } else {
            let wait_s = (want - self.tokens) / limit.per_second;
            Admission::Reject {
                retry_after_ms: retry_after_ms(wait_s * 1000.0),
            }
        }
    }

    /// Takes and returns a lease (`Limiter::lease`), just after an admission counted the
    /// bucket: what the rate refills while a lease lasts (`lease_ns`), at most `max`, and
    /// only from the tokens above half the burst. Near its limit the bucket leases
    /// nothing, so each request is asked and the limit is exact; what a lease left unused
    /// loses is the upper half of the burst, never the rate.
    pub fn lease(&mut self, limit: Limit, lease_ns: u64, max: u32) -> u32 {
        let refill = limit.per_second * lease_ns as f64 / 1e9;
        let spare = self.tokens - limit.burst / 2.0;
        let n = refill.min(spare).min(f64::from(max)).floor();
        if n < 1.0 {
            return 0;
        }
        self.tokens -= n;
        n as u32
    }

    /// The hot-swap hand-off bytes: tokens, then the time they were counted.
    pub fn save(&self) -> Vec<u8> {
        let mut out = self.tokens.to_le_bytes().to_vec();
        out.extend_from_slice(&self.updated_ns.to_le_bytes());
        out
    }

    /// What [`Tokens::save`] wrote, fitted to the new version's limit: at most its burst
    /// (so a lower burst is not exceeded), counted no later than `now_ns` (so a clock from
    /// the future does not hold the refill back). `None` for bytes `save` did not write.
    pub fn restore(saved: &[u8], limit: Limit, now_ns: u64) -> Option<Self> {
        let tokens = f64::from_le_bytes(saved.get(..8)?.try_into().ok()?);
        let updated_ns = u64::from_le_bytes(saved.get(8..16)?.try_into().ok()?);
        if !tokens.is_finite() {
            return None;
        }
        Some(Tokens {
            tokens: tokens.clamp(0.0, limit.burst),
            updated_ns: updated_ns.min(now_ns),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn limit(per_second: f64, burst: f64) -> Limit {
        Limit { per_second, burst }
    }

    fn admitted(t: &mut Tokens, l: Limit, now_ns: u64) -> usize {
        (0..1000)
            .filter(|_| t.take(l, now_ns, 1) == Admission::Admit)
            .count()
    }

    #[test]
    fn admits_the_burst_then_refills_at_the_rate() {
        let l = limit(10.0, 5.0);
        let mut t = Tokens::full(l, S);
        assert_eq!(admitted(&mut t, l, S), 5);
        assert_eq!(
            t.take(l, S, 1),
            Admission::Reject {
                retry_after_ms: 100
            }
        );
        // 300 ms: 3 tokens; a full second is capped by the burst.
        assert_eq!(admitted(&mut t, l, S + 300_000_000), 3);
        assert_eq!(admitted(&mut t, l, 3 * S), 5);
        // Several permits at once wait for all of them; 0 permits count as 1.
        assert_eq!(
            t.take(l, 3 * S, 2),
            Admission::Reject {
                retry_after_ms: 200
            }
        );
        assert_eq!(t.take(l, 3 * S + S / 10, 0), Admission::Admit);
        // A clock going back refills nothing.
        assert!(matches!(t.take(l, S, 1), Admission::Reject { .. }));
    }

    #[test]
    fn leases_what_the_rate_refills_from_the_upper_half_only() {
        const MS: u64 = 1_000_000;
        // 1,000 a second refills one token a millisecond: a lease of 1.
        let l = limit(1000.0, 100.0);
        let mut t = Tokens::full(l, S);
        assert_eq!(t.lease(l, MS, 64), 1);
        assert_eq!(t.tokens, 99.0, "taken from the bucket");
        // A fast rate is capped by `max`, then by the half burst.
        let fast = limit(1e6, 100.0);
        let mut t = Tokens::full(fast, S);
        assert_eq!(t.lease(fast, MS, 64), 50);
        assert_eq!(t.lease(fast, MS, 64), 0, "at half the burst");
        let mut t = Tokens::full(fast, S);
        assert_eq!(t.lease(fast, MS, 8), 8);
        // A rate under one per lease leases nothing: every request is asked.
        let slow = limit(50.0, 20.0);
        let mut t = Tokens::full(slow, S);
        assert_eq!(t.lease(slow, MS, 64), 0);
        assert_eq!(t.tokens, 20.0);
    }

    #[test]
    fn hands_off_its_tokens_fitted_to_the_new_limit() {
        let l = limit(1.0, 5.0);
        let mut t = Tokens::full(l, S);
        assert_eq!(t.take(l, S, 1), Admission::Admit);
        let saved = t.save();
        assert_eq!(Tokens::restore(&saved, l, 2 * S), Some(t));
        let lower = Tokens::restore(&saved, limit(1.0, 2.0), 2 * S).unwrap();
        assert_eq!(lower.tokens, 2.0, "capped by the new burst");
        let early = Tokens::restore(&saved, l, S / 2).unwrap();
        assert_eq!(early.updated_ns, S / 2, "no later than now");
    }

    #[test]
    fn refuses_bytes_it_did_not_write() {
        let l = limit(1.0, 5.0);
        assert_eq!(Tokens::restore(&[1, 2, 3], l, S), None);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let saved = Tokens {
                tokens: bad,
                updated_ns: 0,
            }
            .save();
            assert_eq!(Tokens::restore(&saved, l, S), None, "{bad}");
        }
        let negative = Tokens {
            tokens: -3.0,
            updated_ns: 0,
        };
        assert_eq!(Tokens::restore(&negative.save(), l, S).unwrap().tokens, 0.0);
    }
}
