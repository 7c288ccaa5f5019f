//! Selectors pick one endpoint among a candidate set (BALANCE = SELECT).

use crate::{Config, EndpointId, EndpointTable, Load, LoadMeasure, Outcome, Pair, SetId};

/// The most set ids a selector keeps; the kernel allocates ids densely from 0.
pub const MAX_SETS: usize = 1 << 16;

/// A candidate set, as the kernel defined it, with the plugin's own per-set state.
pub struct CandidateSet<S> {
    /// The kernel's id for this set.
    pub id: SetId,
    /// The members, in the kernel's order. Never empty when `select` sees it.
    pub members: Vec<EndpointId>,
    /// What the plugin derived from the members in [`Selector::prepare`].
    pub state: S,
    /// The members' mean weight in the table the set was defined under: what a
    /// [`LoadMeasure`]'s `per_weight` counts against, as the kernel does.
    pub mean_weight: f64,
}

/// A load-balancing strategy. Implement this and call [`crate::export_selector!`].
pub trait Selector: Sized + 'static {
    /// What the plugin keeps per candidate set (a cursor, prefix sums of weights, ...).
    /// Computed when a set is defined, not per call.
    type SetState: 'static;

    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;

    /// Derives the per-set state when the kernel defines a set.
    fn prepare(&mut self, table: &EndpointTable, members: &[EndpointId]) -> Self::SetState;

    /// Picks a member of `set`. `None` lets the kernel pick at random.
    ///
    /// A two-choice selector (one whose [`Selector::measure`] is `Some`) need not write
    /// it: by default it is [`Selector::select_two`], the lighter of the two kept by the
    /// measure from `host::facts`, what the kernel does without a host call.
    fn select(
        &mut self,
        set: &mut CandidateSet<Self::SetState>,
        hash_key: u64,
    ) -> Option<EndpointId> {
        let measure = self.measure()?;
        let (first, second) = self.select_two(set, hash_key)?;
        match crate::unpack_pair(crate::pack_pair(first, second)) {
            Pair::None => None,
            Pair::One(only) => Some(only),
            Pair::Two(first, second) => {
                let load = |id| Load::from(crate::host::facts(id).unwrap_or_default());
                let keep = measure.keeps_first(load(first), load(second), set.mean_weight);
                Some(if keep { first } else { second })
            }
        }
    }

    /// The two-choice selector's measure (`two-choice-selector` world, built with the
    /// SDK's feature of that name): how the kernel compares the candidates
    /// [`Selector::select_two`] offers. Called once after `new`; `None` (the default):
    /// this plugin, or this config of it, answers through [`Selector::select`].
    fn measure(&self) -> Option<LoadMeasure> {
        None
    }

    /// Two members of `set` for the kernel to compare by [`Selector::measure`]: it keeps
    /// the lighter, the first on a tie. Return the same member twice to offer one.
    /// `None` (the default) lets the kernel pick at random.
    fn select_two(
        &mut self,
        _set: &mut CandidateSet<Self::SetState>,
        _hash_key: u64,
    ) -> Option<(EndpointId, EndpointId)> {
        None
    }

    /// Finished calls, batched. Delivered only to a component built with the SDK's
    /// `learning-selector` feature (the world that exports `feedback`); without it the
    /// kernel keeps no outcomes for the plugin, and facts can be pulled from the host.
    /// Default: ignored.
    fn feedback(&mut self, _outcomes: &[Outcome]) {}

    /// The table changed (sets are dropped and redefined by the kernel afterwards).
    fn endpoints_changed(&mut self, _table: &EndpointTable) {}
}

/// Keeps the table and the candidate sets for a [`Selector`]; what a component runs, and
/// what native tests and benches drive.
pub struct SelectorRuntime<T: Selector> {
    plugin: T,
    table: EndpointTable,
    sets: Vec<Option<CandidateSet<T::SetState>>>,
}

impl<T: Selector> SelectorRuntime<T> {
    /// `init`: builds the plugin from its config.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(SelectorRuntime {
            plugin: T::new(config)?,
            table: EndpointTable::default(),
            sets: Vec::new(),
        })
    }

    /// `endpoints-changed`: replaces the table and forgets every set.
    pub fn endpoints_changed(&mut self, table: EndpointTable) {
        self.sets.clear();
        self.plugin.endpoints_changed(&table);
        self.table = table;
    }

    /// `define-set`: (re)defines a set. Ids at or above [`MAX_SETS`] are ignored, so
    /// `select` on them answers `None` (the kernel's random fallback).
    pub fn define_set(&mut self, id: SetId, members: Vec<EndpointId>) {
        let slot = id as usize;
        if slot >= MAX_SETS {
            return;
        }
        if self.sets.len() <= slot {
            self.sets.resize_with(slot + 1, || None);
        }
        let state = self.plugin.prepare(&self.table, &members);
        let mean_weight = crate::mean_weight(
            members
                .iter()
                .map(|id| self.table.get(*id).map_or(0, |e| e.weight)),
        );
        self.sets[slot] = Some(CandidateSet {
            id,
            members,
            state,
            mean_weight,
        });
    }

    /// `select`: picks from a defined, non-empty set.
    pub fn select(&mut self, id: SetId, hash_key: u64) -> Option<EndpointId> {
        let set = pickable(&mut self.sets, id)?;
        self.plugin.select(set, hash_key)
    }

    /// `select-run` (built with the `run-selector` feature): the plugin's next picks of
    /// set `id`, up to [`crate::RUN`], made by [`Selector::select`] one after the other
    /// (with hash key 0: a run-selector's picks do not depend on it), packed as
    /// [`crate::pack_run`] does. All ones when it picks nothing.
    pub fn select_run(&mut self, id: SetId) -> u64 {
        let Some(set) = pickable(&mut self.sets, id) else {
            return u64::MAX;
        };
        // `pack_run` takes at most a run's worth: the plugin is asked that many times.
        crate::pack_run(std::iter::from_fn(|| self.plugin.select(set, 0)))
    }

    /// `select-two-run` (built with the `two-choice-run-selector` feature): the plugin's
    /// next two pairs of set `id`, drawn by [`Selector::select_two`] one after the other
    /// (with hash key 0: such a selector's draws do not depend on it), packed as
    /// [`crate::pack_run`] does, each pair's first then its second. A pair is packed
    /// whole or not at all; all ones when it draws nothing.
    pub fn select_two_run(&mut self, id: SetId) -> u64 {
        let Some(set) = pickable(&mut self.sets, id) else {
            return u64::MAX;
        };
        let limit = crate::RUN_ID_LIMIT;
        let pairs = std::iter::from_fn(|| self.plugin.select_two(set, 0))
            // An id a run cannot carry would cut its pair in half: the run ends before it.
            .map_while(|(first, second)| {
                (first < limit && second < limit).then_some([first, second])
            });
        // Two pairs fill a run: the plugin draws twice.
        crate::pack_run(pairs.flatten())
    }

    /// `measure`.
    pub fn measure(&self) -> Option<LoadMeasure> {
        self.plugin.measure()
    }

    /// `select-two`: the pair packed as the component returns it ([`crate::pack_pair`];
    /// all ones for none).
    pub fn select_two(&mut self, id: SetId, hash_key: u64) -> u64 {
        let pair =
            pickable(&mut self.sets, id).and_then(|set| self.plugin.select_two(set, hash_key));
        pair.map_or(u64::MAX, |(first, second)| crate::pack_pair(first, second))
    }

    /// `feedback`.
    pub fn feedback(&mut self, outcomes: &[Outcome]) {
        self.plugin.feedback(outcomes)
    }

    /// The plugin itself (for assertions in tests).
    pub fn plugin(&self) -> &T {
        &self.plugin
    }
}

/// Set `id` when it is defined and has members: what a pick is made from.
fn pickable<S>(sets: &mut [Option<CandidateSet<S>>], id: SetId) -> Option<&mut CandidateSet<S>> {
    sets.get_mut(id as usize)?
        .as_mut()
        .filter(|set| !set.members.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers the pairs it was given, in turn, then none.
    struct Script(Vec<(EndpointId, EndpointId)>);

    impl Selector for Script {
        type SetState = ();
        fn new(_config: &Config) -> Result<Self, String> {
            Ok(Script(Vec::new()))
        }
        fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) {}
        fn measure(&self) -> Option<LoadMeasure> {
            Some(LoadMeasure::default())
        }
        fn select_two(
            &mut self,
            _set: &mut CandidateSet<()>,
            hash_key: u64,
        ) -> Option<(EndpointId, EndpointId)> {
            assert_eq!(hash_key, 0, "a run's pairs are drawn without a call's key");
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
    }

    fn runtime(pairs: &[(EndpointId, EndpointId)]) -> SelectorRuntime<Script> {
        let mut rt = SelectorRuntime::<Script>::new(&Config::default()).unwrap();
        rt.define_set(0, vec![1, 2, 3]);
        rt.plugin.0 = pairs.to_vec();
        rt
    }

    fn unpacked(mut run: u64) -> Vec<EndpointId> {
        std::iter::from_fn(|| crate::next_in_run(&mut run)).collect()
    }

    #[test]
    fn a_run_of_pairs_is_two_draws_packed_whole() {
        let mut rt = runtime(&[(1, 2), (3, 3), (2, 1)]);
        assert_eq!(unpacked(rt.select_two_run(0)), [1, 2, 3, 3]);
        // One pair left: a run of one.
        assert_eq!(unpacked(rt.select_two_run(0)), [2, 1]);
        assert_eq!(rt.select_two_run(0), u64::MAX, "no draw, no run");
        // A pair a run cannot carry ends it before that pair, never inside it.
        let mut rt = runtime(&[(1, 2), (3, 70_000)]);
        assert_eq!(unpacked(rt.select_two_run(0)), [1, 2]);
        // An unknown or empty set: no run.
        assert_eq!(rt.select_two_run(9), u64::MAX);
        rt.define_set(1, Vec::new());
        assert_eq!(rt.select_two_run(1), u64::MAX);
    }

    /// Picks 1, 2, 3, ... and counts them.
    struct Counter(EndpointId);

    impl Selector for Counter {
        type SetState = ();
        fn new(_config: &Config) -> Result<Self, String> {
            Ok(Counter(0))
        }
        fn prepare(&mut self, _table: &EndpointTable, _members: &[EndpointId]) {}
        fn select(&mut self, _set: &mut CandidateSet<()>, _hash_key: u64) -> Option<EndpointId> {
            self.0 += 1;
            Some(self.0)
        }
    }

    #[test]
    fn a_run_asks_the_plugin_for_a_runs_worth_of_picks_only() {
        let mut rt = SelectorRuntime::<Counter>::new(&Config::default()).unwrap();
        rt.define_set(0, vec![1, 2, 3]);
        assert_eq!(unpacked(rt.select_run(0)), [1, 2, 3, 4]);
        assert_eq!(rt.plugin.0, 4, "no pick made and dropped");
        assert_eq!(unpacked(rt.select_run(0)), [5, 6, 7, 8]);
    }
}
