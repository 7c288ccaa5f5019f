//! `{{name}}`: success rate over the kernel's window. Refusals (`rejected`) are signs of
//! load, not faults, so they count neither way; below `min-samples` calls the window says
//! nothing and the previous state stands.
//!
//! Config (defaults in brackets): `min-samples` [20], `subhealthy-below` [0.9],
//! `dead-below` [0.5]; `0 <= dead-below <= subhealthy-below <= 1`.

use axle_sdk::{Config, HealthScorer, HealthState, Verdict, WindowStats};

/// The scorer.
pub struct SuccessRate {
    min_samples: u64,
    subhealthy_below: f64,
    dead_below: f64,
}

/// The weight each state keeps, in per-mille.
fn weight(state: HealthState) -> u32 {
    match state {
        HealthState::Healthy => 1000,
        HealthState::Subhealthy => 500,
        HealthState::Dead => 0,
    }
}

impl HealthScorer for SuccessRate {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["min-samples", "subhealthy-below", "dead-below"])?;
        let min_samples = config.u64_or("min-samples", 20)?;
        let subhealthy_below = config.f64_or("subhealthy-below", 0.9)?;
        let dead_below = config.f64_or("dead-below", 0.5)?;
        if !(0.0..=1.0).contains(&subhealthy_below) {
            return Err("key `subhealthy-below`: must be between 0 and 1".to_string());
        }
        if !(0.0..=subhealthy_below).contains(&dead_below) {
            return Err("key `dead-below`: must be between 0 and `subhealthy-below`".to_string());
        }
        Ok(SuccessRate {
            min_samples,
            subhealthy_below,
            dead_below,
        })
    }

    fn score(&mut self, stats: &WindowStats) -> Verdict {
        let counted = stats.total.saturating_sub(stats.rejected);
        let state = if u64::from(counted) < self.min_samples.max(1) {
            stats.previous
        } else {
            let faults = stats.timeouts.saturating_add(stats.failures).min(counted);
            let rate = f64::from(counted - faults) / f64::from(counted);
            if rate < self.dead_below {
                HealthState::Dead
            } else if rate < self.subhealthy_below {
                HealthState::Subhealthy
            } else {
                HealthState::Healthy
            }
        };
        Verdict {
            state,
            weight_permille: weight(state),
        }
    }
}

axle_sdk::export_health_scorer!(SuccessRate);
