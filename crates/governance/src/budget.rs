//! A retry budget (per service on the caller's side), so a failing cluster gets no retry
//! storm: every request deposits `ratio` of a retry, every retry withdraws one, and a
//! small floor (`min_per_s`) lets low-traffic callers retry at all. Finagle's design
//! (20% + 10/s by default).
//!
//! Deposits happen on every request, so they are one atomic add (in thousandths of a
//! retry), and none once the budget is full, which is where a healthy service keeps it:
//! then a request only reads the balance, and the line it sits on stays in every core's
//! cache. The lock is only for withdrawals, which are rare.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Mutex;

use axle_core::now_ns;
use crossbeam_utils::CachePadded;

/// Thousandths of a retry per unit.
const MILLI: f64 = 1000.0;

struct Floor {
    tokens: f64,
    /// Kernel-clock nanoseconds (`axle_core::now_ns`, virtual under `axle sim`).
    last: u64,
}

/// One budget.
pub struct RetryBudget {
    /// Deposit per request, in thousandths.
    deposit: i64,
    /// Most thousandths that may be saved up.
    cap: i64,
    /// On a line of its own: the rest of the service's state beside it is read by every
    /// call.
    balance: CachePadded<AtomicI64>,
    min_per_s: f64,
    floor: Mutex<Floor>,
}

impl RetryBudget {
    pub fn new(ratio: f64, min_per_s: f64) -> Self {
        RetryBudget {
            deposit: (ratio * MILLI).round() as i64,
            // Savings are capped so a long quiet spell cannot fund a storm later.
            cap: (100.0_f64.max(ratio * 1000.0) * MILLI) as i64,
            balance: CachePadded::new(AtomicI64::new(0)),
            min_per_s,
            floor: Mutex::new(Floor {
                tokens: min_per_s,
                last: now_ns(),
            }),
        }
    }

    /// A request was made.
    pub fn deposit(&self) {
        // Full: nothing to add, so nothing written. A withdrawal racing this read costs
        // the budget one deposit, a fraction of a retry.
        if self.balance.load(Relaxed) >= self.cap {
            return;
        }
        if self.balance.fetch_add(self.deposit, Relaxed) + self.deposit > self.cap {
            self.balance.fetch_min(self.cap, Relaxed);
        }
    }

    /// Asks for one retry.
    pub fn withdraw(&self) -> bool {
        let unit = MILLI as i64;
        let taken = self
            .balance
            .fetch_update(Relaxed, Relaxed, |b| (b >= unit).then_some(b - unit))
            .is_ok();
        if taken {
            return true;
        }
        let mut f = self.floor.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ns();
        let elapsed = now.saturating_sub(f.last) as f64 / 1e9;
        f.last = now;
        f.tokens = (f.tokens + elapsed * self.min_per_s).min(self.min_per_s);
        if f.tokens >= 1.0 {
            f.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_stay_within_the_ratio() {
        let b = RetryBudget::new(0.2, 0.0);
        let mut retries = 0;
        for _ in 0..1000 {
            b.deposit();
            // Every request fails and wants 3 retries.
            for _ in 0..3 {
                if b.withdraw() {
                    retries += 1;
                }
            }
        }
        assert!((195..=200).contains(&retries), "{retries}");
    }

    #[test]
    fn the_floor_lets_a_quiet_caller_retry() {
        let b = RetryBudget::new(0.2, 5.0);
        let granted = (0..10).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 5);
    }

    #[test]
    fn savings_are_capped() {
        let b = RetryBudget::new(0.5, 0.0);
        for _ in 0..1_000_000 {
            b.deposit();
        }
        let granted = (0..10_000).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 500, "capped at 1000 x ratio");
    }

    #[test]
    fn a_full_budget_takes_deposits_again_once_a_retry_spent_from_it() {
        let b = RetryBudget::new(0.5, 0.0);
        for _ in 0..2_000 {
            b.deposit();
        }
        assert!(b.withdraw());
        b.deposit();
        b.deposit();
        let granted = (0..10_000).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 500, "full again after two deposits");
    }
}
