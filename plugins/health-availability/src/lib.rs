//! `availability`: success rate over the kernel's window, with a minimum sample count so
//! that two failed requests never condemn a node (the seeds' half-dead-node fix, without
//! outlier detection's false positives).
//!
//! Config (defaults in brackets):
//! - `min-samples` [20] — below this many calls in the window, traffic says nothing and
//!   the previous verdict stands (unless heartbeats say otherwise).
//! - `subhealthy-below` [0.9] — success rate under which the endpoint is subhealthy.
//! - `dead-below` [0.2] — success rate under which it is dead.
//! - `heartbeat-failures` [3] — consecutive heartbeat failures that make it subhealthy.
//!
//! Business errors and refusals (`overloaded`, `shutting_down`) are not faults: the rate is
//! `1 - (timeouts + failures) / (total - rejected)`. The weight factor is the success rate
//! (a 95%-available endpoint keeps 950‰ of its weight).

use axle_sdk::{Config, HealthScorer, HealthState, Verdict, WindowStats};

/// The availability scorer.
pub struct Availability {
    min_samples: u32,
    subhealthy_below: f64,
    dead_below: f64,
    heartbeat_failures: u32,
}

impl HealthScorer for Availability {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[
            "min-samples",
            "subhealthy-below",
            "dead-below",
            "heartbeat-failures",
        ])?;
        let scorer = Availability {
            min_samples: config
                .u64_or("min-samples", 20)?
                .clamp(1, u64::from(u32::MAX)) as u32,
            subhealthy_below: config.f64_or("subhealthy-below", 0.9)?,
            dead_below: config.f64_or("dead-below", 0.2)?,
            heartbeat_failures: config
                .u64_or("heartbeat-failures", 3)?
                .min(u64::from(u32::MAX)) as u32,
        };
        if !(0.0..=1.0).contains(&scorer.subhealthy_below) {
            return Err("key `subhealthy-below`: must be between 0 and 1".to_string());
        }
        if !(0.0..=scorer.subhealthy_below).contains(&scorer.dead_below) {
            return Err("key `dead-below`: must be between 0 and `subhealthy-below`".to_string());
        }
        Ok(scorer)
    }

    fn score(&mut self, s: &WindowStats) -> Verdict {
        let counted = s.total.saturating_sub(s.rejected);
        let faults = s.timeouts.saturating_add(s.failures).min(counted);
        let (mut state, weight_permille) = if counted < self.min_samples {
            (s.previous, 1000)
        } else {
            let rate = 1.0 - f64::from(faults) / f64::from(counted);
            let state = if rate < self.dead_below {
                HealthState::Dead
            } else if rate < self.subhealthy_below {
                HealthState::Subhealthy
            } else {
                HealthState::Healthy
            };
            (state, (rate * 1000.0).round() as u32)
        };
        if self.heartbeat_failures > 0
            && s.heartbeat_failures >= self.heartbeat_failures
            && state == HealthState::Healthy
        {
            state = HealthState::Subhealthy;
        }
        Verdict {
            state,
            weight_permille,
        }
    }
}

axle_sdk::export_health_scorer!(Availability);

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(total: u32, failures: u32, previous: HealthState) -> WindowStats {
        WindowStats {
            total,
            failures,
            previous,
            ..Default::default()
        }
    }

    #[test]
    fn ignores_a_window_below_the_minimum_samples() {
        let mut s = Availability::new(&Config::default()).unwrap();
        // 2 of 3 failed, but 3 < 20 samples: the previous verdict stands.
        let v = s.score(&stats(3, 2, HealthState::Healthy));
        assert_eq!(v.state, HealthState::Healthy);
        assert_eq!(v.weight_permille, 1000);
    }

    #[test]
    fn grades_by_success_rate() {
        let mut s = Availability::new(&Config::default()).unwrap();
        assert_eq!(
            s.score(&stats(100, 5, HealthState::Healthy)).state,
            HealthState::Healthy
        );
        let v = s.score(&stats(100, 40, HealthState::Healthy));
        assert_eq!((v.state, v.weight_permille), (HealthState::Subhealthy, 600));
        assert_eq!(
            s.score(&stats(100, 90, HealthState::Healthy)).state,
            HealthState::Dead
        );
        assert_eq!(
            s.score(&stats(100, 0, HealthState::Dead)).state,
            HealthState::Healthy
        );
    }

    #[test]
    fn refusals_are_not_faults() {
        let mut s = Availability::new(&Config::default()).unwrap();
        let v = s.score(&WindowStats {
            total: 100,
            rejected: 90,
            failures: 0,
            ..Default::default()
        });
        assert_eq!(v.state, HealthState::Healthy);
    }
}
