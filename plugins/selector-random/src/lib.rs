//! `random`: a uniform pick among the set. Config: `seed` (optional, for reproducible runs).

use axle_sdk::{CandidateSet, Config, EndpointId, EndpointTable, Rng, Selector};

/// The uniform random selector.
pub struct Random {
    rng: Rng,
}

impl Selector for Random {
    type SetState = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed"])?;
        Ok(Random {
            rng: Rng::from_config(config)?,
        })
    }

    fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) {}

    fn select(&mut self, set: &mut CandidateSet<()>, _hash_key: u64) -> Option<EndpointId> {
        let i = self.rng.below(set.members.len() as u64) as usize;
        Some(set.members[i])
    }
}

axle_sdk::export_selector!(Random);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, SelectorRuntime};

    #[test]
    fn picks_every_member_about_equally() {
        let config = Config::from_pairs([("seed", ConfigValue::Int(42))]);
        let mut rt = SelectorRuntime::<Random>::new(&config).unwrap();
        rt.endpoints_changed(testing::table(4));
        rt.define_set(0, vec![0, 1, 2, 3]);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[rt.select(0, 0).unwrap() as usize] += 1;
        }
        for c in counts {
            assert!((9_400..10_600).contains(&c), "{counts:?}");
        }
    }
}
