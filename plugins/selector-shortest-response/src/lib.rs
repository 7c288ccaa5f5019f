//! `shortest-response`: Dubbo's shortest-response rule. A candidate's expected wait is
//! (in-flight + 1) × latency EWMA, both from the kernel's facts; the smallest wins, and
//! candidates tied on it are split at random in proportion to their weights.
//!
//! Dubbo compares every member; that costs one host call per member per pick (what made
//! the old `least-active` 650 µs per pick at 10,000 endpoints). Here the candidates are
//! `choices` distinct members drawn by effective weight (default 2: the power of two
//! choices), whatever the set size; a set of at most `choices` members is compared whole,
//! which is Dubbo's rule exactly. With two, it is a two-choice selector: the kernel
//! compares the pair from the facts it keeps, with no host call per pick; with more, a
//! pick makes `choices` host calls. Unlike `p2c-ewma`, the wait is not divided by
//! weight: weight decides who is drawn and breaks ties, the fastest expected answer wins. Config: `seed`, `choices` (2..=16, default 2),
//! `default-latency-us` (the latency assumed before an endpoint's first answer, default
//! 1000: low enough that new endpoints get tried, not so low that they get every call).

use axle_sdk::{host, CandidateSet, Config, EndpointId, EndpointTable, LoadMeasure, Rng, Selector};
use axle_selector_weights::WeightedSet;

/// The shortest-response selector.
pub struct ShortestResponse {
    rng: Rng,
    choices: usize,
    default_latency_ns: u64,
    /// The draws of the current pick (kept to not allocate per pick).
    drawn: Vec<usize>,
}

impl ShortestResponse {
    /// The expected wait of one more request at `id`, in nanoseconds.
    fn expected_wait(&self, id: EndpointId) -> u128 {
        let facts = host::facts(id).unwrap_or_default();
        let latency = match facts.ewma_latency_ns {
            0 => self.default_latency_ns,
            l => l,
        };
        (u128::from(facts.in_flight) + 1) * u128::from(latency)
    }
}

impl Selector for ShortestResponse {
    /// The set's weights, sampled in O(1).
    type SetState = WeightedSet;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["seed", "choices", "default-latency-us"])?;
        let choices = config.u64_or("choices", 2)?;
        if !(2..=16).contains(&choices) {
            return Err(format!("`choices` must be 2..=16, not {choices}"));
        }
        Ok(ShortestResponse {
            rng: Rng::from_config(config)?,
            choices: choices as usize,
            default_latency_ns: config
                .u64_or("default-latency-us", 1000)?
                .saturating_mul(1000),
            drawn: Vec::with_capacity(choices as usize),
        })
    }

    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> WeightedSet {
        WeightedSet::new(table, members)
    }

    fn select(
        &mut self,
        set: &mut CandidateSet<WeightedSet>,
        _hash_key: u64,
    ) -> Option<EndpointId> {
        set.state
            .distinct(&mut self.rng, self.choices, &mut self.drawn);
        // The draws come in successive weighted order, so keeping the earliest of tied
        // candidates splits ties in proportion to their weights (Dubbo's tie rule).
        let mut best: Option<(usize, u128)> = None;
        for &p in &self.drawn {
            let wait = self.expected_wait(set.members[p]);
            if best.is_none_or(|(_, w)| wait < w) {
                best = Some((p, wait));
            }
        }
        set.members.get(best?.0).copied()
    }

    /// With two choices: the expected wait, (in flight + 1) × latency, compared by the
    /// kernel from the facts it keeps (no host call per pick). With more, `select` reads
    /// them through the host.
    fn measure(&self) -> Option<LoadMeasure> {
        (self.choices == 2).then_some(LoadMeasure {
            per_weight: false,
            latency: true,
            default_latency_ns: self.default_latency_ns,
        })
    }

    fn select_two(
        &mut self,
        set: &mut CandidateSet<WeightedSet>,
        _hash_key: u64,
    ) -> Option<(EndpointId, EndpointId)> {
        axle_selector_weights::two_by_weight(set, &mut self.rng)
    }
}

axle_sdk::export_selector!(ShortestResponse);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, EndpointFacts, SelectorRuntime};

    fn runtime(weights: &[u32], choices: i64) -> SelectorRuntime<ShortestResponse> {
        let config = Config::from_pairs([
            ("seed", ConfigValue::Int(3)),
            ("choices", ConfigValue::Int(choices)),
        ]);
        let mut rt = SelectorRuntime::<ShortestResponse>::new(&config).unwrap();
        rt.endpoints_changed(axle_sdk::testing::weighted_table(weights));
        rt.define_set(0, (0..weights.len() as u32).collect());
        rt
    }

    fn facts(id: u32, in_flight: u32, latency_ms: u64) {
        testing::set_facts(
            id,
            EndpointFacts {
                in_flight,
                ewma_latency_ns: latency_ms * 1_000_000,
                ..Default::default()
            },
        );
    }

    fn counts(rt: &mut SelectorRuntime<ShortestResponse>, n: usize, picks: u32) -> Vec<u32> {
        let mut c = vec![0; n];
        for _ in 0..picks {
            c[rt.select(0, 0).unwrap() as usize] += 1;
        }
        c
    }

    #[test]
    fn the_shortest_expected_wait_wins_on_a_whole_small_set() {
        testing::reset();
        // Waits: 0: (2+1)×10 = 30 ms, 1: (0+1)×40 = 40 ms, 2: (5+1)×4 = 24 ms.
        facts(0, 2, 10);
        facts(1, 0, 40);
        facts(2, 5, 4);
        let mut rt = runtime(&[100; 3], 3);
        assert_eq!(counts(&mut rt, 3, 500), vec![0, 0, 500]);
        // Two more in flight at 2: (7+1)×4 = 32 ms, and 0 wins.
        facts(2, 7, 4);
        assert_eq!(counts(&mut rt, 3, 500), vec![500, 0, 0]);
    }

    #[test]
    fn ties_are_split_by_weight() {
        testing::reset();
        // Equal waits (nothing measured): 12.5 / 12.5 / 75 %, within 3 points, whether the
        // whole set is compared or two weighted draws.
        for choices in [3, 2] {
            let mut rt = runtime(&[100, 100, 600], choices);
            let c = counts(&mut rt, 3, 8_000);
            assert!((760..1_240).contains(&c[0]), "{choices}: {c:?}");
            assert!((760..1_240).contains(&c[1]), "{choices}: {c:?}");
            assert!((5_760..6_240).contains(&c[2]), "{choices}: {c:?}");
        }
        // Two tied fast members and a slow one: the fast two split 1 : 3.
        facts(0, 0, 5);
        facts(1, 0, 5);
        facts(2, 0, 50);
        let mut rt = runtime(&[100, 300, 100], 3);
        let c = counts(&mut rt, 3, 8_000);
        assert_eq!(c[2], 0, "{c:?}");
        assert!((1_760..2_240).contains(&c[0]), "{c:?}");
    }

    #[test]
    fn two_choices_never_pick_the_worst_of_a_large_set() {
        testing::reset();
        for id in 0..100 {
            facts(id, 0, 1 + u64::from(id));
        }
        let mut rt = runtime(&[100; 100], 2);
        let c = counts(&mut rt, 100, 20_000);
        assert_eq!(c[99], 0, "the slowest loses every duel it is drawn into");
        // The fastest wins every duel it is in: 2/100 of the picks, within noise.
        assert!((300..500).contains(&c[0]), "{}", c[0]);
    }

    #[test]
    fn config_is_validated() {
        let bad = Config::from_pairs([("choices", ConfigValue::Int(1))]);
        assert!(SelectorRuntime::<ShortestResponse>::new(&bad).is_err());
        let unknown = Config::from_pairs([("window", ConfigValue::Int(3))]);
        let err = SelectorRuntime::<ShortestResponse>::new(&unknown)
            .err()
            .unwrap();
        assert!(err.contains("unknown key `window`"), "{err}");
    }
}
