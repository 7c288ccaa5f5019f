//! A retry budget (per service on the caller's side), so a failing cluster gets no retry
//! storm: every request deposits `ratio` of a retry, every retry withdraws one, and a
//! small floor (`min_per_s`) lets low-traffic callers retry at all. Finagle's design
//! (20% + 10/s by default).

use std::sync::Mutex;
use std::time::Instant;

struct State {
    balance: f64,
    floor: f64,
    last: Instant,
}

/// One budget.
pub struct RetryBudget {
    ratio: f64,
    min_per_s: f64,
    state: Mutex<State>,
}

impl RetryBudget {
    pub fn new(ratio: f64, min_per_s: f64) -> Self {
        RetryBudget {
            ratio,
            min_per_s,
            state: Mutex::new(State {
                balance: 0.0,
                floor: min_per_s,
                last: Instant::now(),
            }),
        }
    }

    /// A request was made.
    pub fn deposit(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Savings are capped so a long quiet spell cannot fund a storm later.
        s.balance = (s.balance + self.ratio).min(100.0_f64.max(self.ratio * 1000.0));
    }

    /// Asks for one retry.
    pub fn withdraw(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.duration_since(s.last).as_secs_f64();
        s.last = now;
        s.floor = (s.floor + elapsed * self.min_per_s).min(self.min_per_s);
        if s.balance >= 1.0 {
            s.balance -= 1.0;
            true
        } else if s.floor >= 1.0 {
            s.floor -= 1.0;
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
}
