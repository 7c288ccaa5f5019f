//! `zone-aware`: calls stay in the caller's own zone while that zone is healthy, and spill
//! to the other zones in proportion as its health drops. Within either side, members are
//! picked by smooth weighted round-robin on their effective weights (as `smooth-weighted`).
//!
//! The own zone's health is `sum(effective weight) / sum(full weight)` over its members,
//! where an endpoint's effective weight is what the endpoint table carries (configured ×
//! warm-up × health factor) and its full weight is `full-weight`. The table carries only
//! the effective weight — the configured one is not visible to plugins — so `full-weight`
//! stands for it (default 100, the kernel's default weight; set it to the weight the own
//! zone's endpoints are configured with). An effective weight above it counts as full.
//! With health `h`, a pick stays local with probability 1 when `h >= min-healthy`, else
//! `h / min-healthy`: a zone at half health with `min-healthy` 0.7 keeps about 71% of the
//! picks and sends 29% away. No local member (or none with weight) sends every pick away;
//! no remote member keeps every pick local.
//!
//! Everything is computed when a set is defined: the kernel republishes the table when an
//! effective weight moves by more than a tenth and then redefines every set, so the split
//! follows health without a host call per pick. A pick costs one random number and a
//! smooth-weighted step (`axle_selector_weights::Schedule`).
//!
//! Config: `zone` (required: the caller's own zone), `key` (the endpoint tag holding the
//! zone, default `zone`), `min-healthy` (0 < x <= 1, default 0.7), `full-weight` (default
//! 100), `seed` (optional, for reproducible runs).

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};
use axle_selector_weights::{member_weights, Schedule};

/// Resolution of the local share: the probability is kept as a count out of this.
const SHARE_SCALE: u64 = 1 << 32;

/// The zone-aware selector.
pub struct ZoneAware {
    zone: String,
    key: String,
    min_healthy: f64,
    full_weight: u64,
    rng: Rng,
}

/// The per-set state: each side's schedule and the local share.
#[derive(Debug)]
pub struct Zones {
    local: Schedule,
    remote: Schedule,
    /// Picks stay local when a draw below `SHARE_SCALE` falls under this.
    local_share: u64,
}

impl ZoneAware {
    /// The own zone's health in `0..=1` (0 when it has no member), from the members'
    /// effective weights against `full-weight` each.
    fn health(&self, effective: &[u64]) -> f64 {
        if effective.is_empty() {
            return 0.0;
        }
        let have: u64 = effective.iter().map(|w| (*w).min(self.full_weight)).sum();
        have as f64 / (self.full_weight * effective.len() as u64) as f64
    }
}

impl Selector for ZoneAware {
    type SetState = Zones;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["zone", "key", "min-healthy", "full-weight", "seed"])?;
        let zone = match config.get("zone") {
            None => return Err("key `zone`: required (the caller's own zone)".to_string()),
            Some(_) => config.text_or("zone", "")?,
        };
        if zone.is_empty() {
            return Err("key `zone`: must not be empty".to_string());
        }
        let key = config.text_or("key", "zone")?;
        if key.is_empty() {
            return Err("key `key`: must not be empty".to_string());
        }
        let min_healthy = config.f64_or("min-healthy", 0.7)?;
        if !(min_healthy > 0.0 && min_healthy <= 1.0) {
            return Err(format!(
                "key `min-healthy`: expected a number in (0, 1], got `{min_healthy}`"
            ));
        }
        let full_weight = config.u64_or("full-weight", 100)?;
        if full_weight == 0 || full_weight > u64::from(u32::MAX) {
            return Err(format!(
                "key `full-weight`: expected 1 to {}, got `{full_weight}`",
                u32::MAX
            ));
        }
        Ok(ZoneAware {
            zone,
            key,
            min_healthy,
            full_weight,
            rng: Rng::from_config(config)?,
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> Zones {
        // A member missing from the table has no known zone: it is left out of both sides.
        let (mut local, mut remote) = (Vec::new(), Vec::new());
        let mut local_effective = Vec::new();
        for id in members {
            let Some(e) = table.get(*id) else { continue };
            if e.tag(&self.key) == Some(self.zone.as_str()) {
                local.push(*id);
                local_effective.push(u64::from(e.weight));
            } else {
                remote.push(*id);
            }
        }
        let health = self.health(&local_effective);
        let share = if remote.is_empty() || health >= self.min_healthy {
            1.0
        } else {
            health / self.min_healthy
        };
        Zones {
            local: Schedule::new(&local, &member_weights(table, &local)),
            remote: Schedule::new(&remote, &member_weights(table, &remote)),
            local_share: (share * SHARE_SCALE as f64) as u64,
        }
    }

    fn select(&mut self, set: &mut CandidateSet<Zones>, _hash_key: u64) -> Option<EndpointId> {
        let zones = &mut set.state;
        let stay = zones.local_share >= SHARE_SCALE
            || (zones.local_share > 0 && self.rng.below(SHARE_SCALE) < zones.local_share);
        if stay {
            zones.local.pick().or_else(|| zones.remote.pick())
        } else {
            zones.remote.pick().or_else(|| zones.local.pick())
        }
    }
}

axle_sdk::export_selector!(ZoneAware);

#[cfg(test)]
mod tests;
