//! A run-selector's picks (WIT `run-selector`): the kernel asks `select-run` for up to four
//! picks, up to [`RUNS_AN_ASK`] times in one hold of the plugin's lock, uses the first
//! pick, and the thread that asked holds the rest for its next calls of the same set, in
//! the plugin's order, without the plugin's lock or any write another core reads. A
//! thread that moves on to another set, or ends, hands the picks it did not use back to
//! the set ([`super::sets::Run`]), and the next ask of that set, from any thread, takes
//! them before the plugin makes new ones: no pick is dropped, so a rotation's shares stay
//! exact.
//!
//! A two-choice run-selector's pairs (WIT `two-choice-run-selector`) go the same way, two
//! ids at a time: the kernel asks `select-two-run` for two pairs (as many times), and each
//! pair is compared by the set's loads when it is taken, so a pick made ahead still goes
//! to the lighter candidate of that moment. Only whole pairs are held and handed back.

use std::sync::Arc;

use axle_spi::LoadMeasure;

use super::{random_pick, wire_id, Member, Runner, Selection, SelectorPlugin, SetMembers};
use crate::engine;
use crate::stats::Fault;

/// How many runs one ask of the plugin takes, one call after another in one hold of its
/// lock: 16 picks (8 pairs) an ask. The lock's word is a line the other core wrote last,
/// and the first call of a hold finds wasmtime's tables cold where the next ones find them
/// warm, so four calls in one hold cost far less than four holds (`docs/performance.md`,
/// "Four runs in one hold of the lock").
const RUNS_AN_ASK: usize = 4;

/// An ask makes a component's next call only while it has taken less than one call's
/// timeout divided by this ([`Runner::runs`]): a quarter of it.
const ASK_SHARE: u64 = 4;

/// The picks a thread holds: up to [`RUNS_AN_ASK`] packed runs (`axle_spi::pack_run`),
/// used in order; a spent run is all ones.
type Picks = [u64; RUNS_AN_ASK];

/// No picks held.
const NO_PICKS: Picks = [u64::MAX; RUNS_AN_ASK];

/// The runs held by a thread: the picks of set `set` of selector `selector` it has not
/// used yet.
struct Held {
    selector: u64,
    set: u32,
    members: Arc<SetMembers>,
    picks: Picks,
}

impl Drop for Held {
    /// The thread moved on (or ended): what it did not use goes back to the set.
    fn drop(&mut self) {
        self.members.run.hand_back(&self.picks);
    }
}

thread_local! {
    /// The runs this thread holds, of the set it took a run-selector's pick from last.
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
}

impl SelectorPlugin {
    /// A run-selector's pick, or a two-choice run-selector's (see
    /// [`SelectorPlugin::select`]).
    pub(super) fn select_from_run(&self, id: u32) -> Option<Selection> {
        let two = self.measure.as_ref();
        // The set this thread holds a run of, when it is this one and still open: the
        // next pick comes from the run, or a spent run is refilled in place.
        let (made_ahead, holding) = HELD.with_borrow_mut(|held| match held {
            Some(h) if h.selector == self.id && h.set == id && !h.members.run.is_closed() => (
                take(&mut h.picks, &h.members, two),
                Some(Arc::as_ptr(&h.members)),
            ),
            _ => (None, None),
        });
        if let Some(endpoint) = made_ahead {
            return Some(Selection::by_plugin(endpoint));
        }
        match self.pool.with(|member| member.select_run(id, two, holding)) {
            Ok(Some((selection, Some(members), picks))) => {
                let run = Held {
                    selector: self.id,
                    set: id,
                    members,
                    picks,
                };
                // The run this replaces is handed back to its set as it drops, out of the
                // plugin's lock.
                drop(HELD.replace(Some(run)));
                Some(selection)
            }
            Ok(Some((selection, None, picks))) => {
                // New runs of the set this thread holds, whose last runs are spent: the
                // set's counts are not written, by a clone or by a drop.
                HELD.with_borrow_mut(|held| match held {
                    // Still the runs `holding` named: nothing ran on this thread between
                    // (a thread-local only this thread touches), so the other arm is never
                    // taken; it is there so new runs can never land on another set's.
                    Some(h) if holding == Some(Arc::as_ptr(&h.members)) => h.picks = picks,
                    _ => {}
                });
                Some(selection)
            }
            Ok(None) => None,
            Err(Fault::Quarantined) => self.quarantined(id),
            Err(_) => None,
        }
    }
}

/// The next pick off the runs held: the next one, or with `two` (a two-choice selector's
/// pairs), the lighter of the next pair by the set's loads now.
fn take(picks: &mut Picks, set: &SetMembers, two: Option<&LoadMeasure>) -> Option<u32> {
    picks.iter_mut().find_map(|run| take_from(run, set, two))
}

/// [`take`], from one packed run.
fn take_from(run: &mut u64, set: &SetMembers, two: Option<&LoadMeasure>) -> Option<u32> {
    match two {
        None => axle_spi::next_in_run(run),
        Some(measure) => {
            let (first, second) = axle_spi::next_pair_in_run(run)?;
            Some(match &set.loads {
                Some(loads) => loads.lighter(measure, first, second),
                None => first,
            })
        }
    }
}

impl Member {
    /// Picks from set `id` for a run-selector (or with `two`, a two-choice
    /// run-selector): the first of the picks other threads handed back, or of new runs,
    /// with the rest for the asking thread to hold. Each pick of the new runs is checked
    /// against the set; one outside it voids them all (a fault).
    ///
    /// `holding` is the set the asking thread holds spent runs of (compared by address,
    /// never read through): the set goes back with the picks only to a thread that does
    /// not hold it already. A clone for every ask, and the drop of the one it replaced,
    /// wrote the set's reference count from both cores every few picks.
    fn select_run(
        &mut self,
        id: u32,
        two: Option<&LoadMeasure>,
        holding: Option<*const SetMembers>,
    ) -> Option<(Selection, Option<Arc<SetMembers>>, Picks)> {
        let handed =
            |set: &Arc<SetMembers>| (holding != Some(Arc::as_ptr(set))).then(|| set.clone());
        let set = self.sets.get(&id).filter(|set| !set.ids.is_empty())?;
        if let Some(mut left) = set.run.take_left() {
            if let Some(endpoint) = take(&mut left, set, two) {
                return Some((Selection::by_plugin(endpoint), handed(set), left));
            }
        }
        let pairs = two.is_some();
        let runs = self.ensure().and_then(|()| self.runner.runs(id, pairs));
        // Looked up again: asking the plugin needed the member whole. The sets did not
        // change in between (they change only under the pool's lock, which this holds).
        let set = self.sets.get(&id)?;
        let mut rest = match runs {
            Ok(runs) => runs,
            Err(_) => return Some((random_pick(&set.ids), handed(set), NO_PICKS)),
        };
        for mut picks in rest {
            while let Some(pick) = axle_spi::next_in_run(&mut picks) {
                if !set.members.contains(pick) {
                    let fault = Fault::Invalid(format!("endpoint {pick} is not in set {id}"));
                    self.runner.fault(&self.stats, run_export(pairs), &fault);
                    return Some((random_pick(&set.ids), handed(set), NO_PICKS));
                }
            }
        }
        let Some(endpoint) = take(&mut rest, set, two) else {
            // No run: one pick, as a plain selector (or a plain two-choice one) is asked.
            let set = handed(set);
            let selection = self.select(id, 0, two)?;
            return Some((selection, set, NO_PICKS));
        };
        Some((Selection::by_plugin(endpoint), handed(set), rest))
    }
}

impl Runner {
    /// Up to [`RUNS_AN_ASK`] runs (with `pairs`, of pairs, whole pairs only), asked one
    /// after another. Asking stops at a run shorter than a full one (the plugin has no
    /// more to give, or an id a run cannot carry came next), and at a fault. A fault on
    /// the first call is the answer; after a fault on a later one, the answer is the runs
    /// already made (each pick the plugin's own, checked like any other), and the next
    /// ask finds the instance the fault replaced.
    ///
    /// A component's next call is made only while the ask has taken less than a quarter
    /// of one call's timeout ([`ASK_SHARE`]), in the engine's ticks (a load each, wall time
    /// to a tick and the ticker's lateness): four of a slow plugin's calls in one hold would
    /// keep every other thread waiting for the lock four times as long as one call can
    /// (`pool.rs`). A fast plugin's ask is cut only when a tick falls in it. A native twin
    /// has no deadline, and is always asked four times.
    fn runs(&mut self, id: u32, pairs: bool) -> Result<Picks, Fault> {
        // A component's ask: the tick it began at, and the ticks it may take.
        let budget = match self {
            Runner::Wasm(inst) => {
                let prepared = inst.prepared();
                let share = prepared.spec.timeout_ms.div_ceil(ASK_SHARE);
                Some((prepared.ticks.now(), engine::ticks_in(share)))
            }
            Runner::Native(_) => None,
        };
        let mut runs = NO_PICKS;
        for (i, slot) in runs.iter_mut().enumerate() {
            if i > 0 && budget.is_some_and(|(asked, share)| self.ticks_now() - asked >= share) {
                break;
            }
            let run = match self.run(id, pairs) {
                Ok(run) => run,
                Err(fault) if i == 0 => return Err(fault),
                Err(_) => break,
            };
            // Held and handed back in whole pairs only, so pairs never mix.
            *slot = if pairs {
                axle_spi::whole_pairs(run)
            } else {
                run
            };
            if axle_spi::run_len(*slot) < axle_spi::RUN {
                break;
            }
        }
        Ok(runs)
    }

    /// The engine's ticks (a native twin is not timed).
    fn ticks_now(&self) -> u64 {
        match self {
            Runner::Wasm(inst) => inst.prepared().ticks.now(),
            Runner::Native(_) => 0,
        }
    }

    /// `select-run`, or with `pairs` `select-two-run`: a packed run.
    fn run(&mut self, id: u32, pairs: bool) -> Result<u64, Fault> {
        let what = run_export(pairs);
        match self {
            Runner::Wasm(inst) => inst.call(what, |b, s| {
                let export = if pairs {
                    &b.select_two_run
                } else {
                    &b.select_run
                };
                match export {
                    Some(f) => f.call(s, (wire_id(id),)).map(|(run,)| run),
                    None => Err(wasmtime::format_err!("the component exports no `{what}`")),
                }
            }),
            Runner::Native(twin) if pairs => Ok(twin.select_two_run(wire_id(id))),
            Runner::Native(twin) => Ok(twin.select_run(wire_id(id))),
        }
    }
}

/// The export a run comes from.
fn run_export(pairs: bool) -> &'static str {
    if pairs {
        "select-two-run"
    } else {
        "select-run"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::NativeSelector;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// What the plugin was asked, in order.
    type Asked = Arc<Mutex<Vec<&'static str>>>;

    /// A rotation over each set's members, or (`pairs`) a two-choice selector drawing
    /// pairs in a cycle over them, (m0, m1), (m1, m2), (m2, m0), ..., the kernel keeping
    /// the one with fewer calls in flight. It counts what it was asked. `stray`: its runs
    /// name an endpoint outside the set; `none`: it answers no runs.
    struct Cycle {
        sets: HashMap<u32, (Vec<u32>, usize)>,
        asked: Asked,
        pairs: bool,
        stray: bool,
        none: bool,
    }

    impl Cycle {
        fn pick(&mut self, id: u32) -> Option<u32> {
            self.pair(id).map(|(first, _)| first)
        }

        fn pair(&mut self, id: u32) -> Option<(u32, u32)> {
            let (members, next) = self.sets.get_mut(&id)?;
            let n = members.len();
            let pair = (members[*next % n], members[(*next + 1) % n]);
            *next += 1;
            Some(pair)
        }

        fn asked(&self, what: &'static str) {
            self.asked.lock().unwrap().push(what);
        }
    }

    impl NativeSelector for Cycle {
        fn endpoints_changed(&mut self, _table: axle_spi::EndpointTable) {}
        fn define_set(&mut self, id: u32, members: Vec<u32>) {
            self.sets.insert(id, (members, 0));
        }
        fn select(&mut self, id: u32, _hash_key: u64) -> Option<u32> {
            self.asked("select");
            self.pick(id).filter(|_| !self.pairs)
        }
        fn measure(&self) -> Option<LoadMeasure> {
            self.pairs.then_some(LoadMeasure {
                per_weight: false,
                latency: false,
                default_latency_ns: 0,
            })
        }
        fn wants_runs(&self) -> bool {
            true
        }
        fn select_run(&mut self, id: u32) -> u64 {
            self.asked("select-run");
            if self.stray {
                return axle_spi::pack_run([99]);
            }
            let picks: Vec<u32> = (0..axle_spi::RUN).filter_map(|_| self.pick(id)).collect();
            axle_spi::pack_run(picks)
        }
        fn select_two(&mut self, id: u32, _hash_key: u64) -> u64 {
            self.asked("select-two");
            self.pair(id)
                .map_or(u64::MAX, |(a, b)| axle_spi::pack_pair(a, b))
        }
        fn select_two_run(&mut self, id: u32) -> u64 {
            self.asked("select-two-run");
            if self.none {
                return u64::MAX;
            }
            if self.stray {
                return axle_spi::pack_run([1, 99]);
            }
            let (a, b) = self.pair(id).expect("a defined set");
            let (c, d) = self.pair(id).expect("a defined set");
            axle_spi::pack_run([a, b, c, d])
        }
    }

    /// The plugin, the facts a two-choice one is compared by (endpoints 1 to 3), and what
    /// it was asked.
    fn cycle(
        pairs: bool,
        stray: bool,
        none: bool,
    ) -> (SelectorPlugin, Vec<Arc<axle_facts::EndpointCell>>, Asked) {
        let asked = Asked::default();
        let twin = Cycle {
            sets: HashMap::new(),
            asked: asked.clone(),
            pairs,
            stray,
            none,
        };
        let facts = axle_facts::FactsTable::new();
        let cells = (1..=3).map(|id| facts.register(id, 100)).collect();
        let owner = crate::pool::Owner::named("cycle");
        let plugin = SelectorPlugin::native(Box::new(twin), owner, facts);
        (plugin, cells, asked)
    }

    fn rotation() -> (SelectorPlugin, Asked) {
        let (plugin, _, asked) = cycle(false, false, false);
        (plugin, asked)
    }

    /// A two-choice selector answering runs of pairs (`none`: answering none).
    fn pairs(none: bool) -> (SelectorPlugin, Vec<Arc<axle_facts::EndpointCell>>, Asked) {
        cycle(true, false, none)
    }

    fn picks(p: &SelectorPlugin, set: u32, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| p.select(set, 7).expect("a pick").endpoint)
            .collect()
    }

    /// One ask: [`RUNS_AN_ASK`] calls of `what`, in one hold of the lock.
    fn one_ask(what: &'static str) -> [&'static str; RUNS_AN_ASK] {
        [what; RUNS_AN_ASK]
    }

    #[test]
    fn runs_serve_the_next_picks_in_the_plugins_order_with_one_ask() {
        let (p, asked) = rotation();
        assert!(p.runs());
        let (a, b) = (p.intern_set(&[10, 11, 12]), p.intern_set(&[20, 21]));
        assert_eq!(picks(&p, a, 5), [10, 11, 12, 10, 11]);
        // Four runs of four in one ask: this thread holds eleven more.
        assert_eq!(
            std::mem::take(&mut *asked.lock().unwrap()),
            one_ask("select-run")
        );
        // A thread moving between sets drops no pick: it hands what it holds back to the
        // set it leaves, takes it again when it comes back, and each set's rotation goes
        // on where it was.
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(picks(&p, b, 1)[0]);
            seen.push(picks(&p, a, 1)[0]);
        }
        assert_eq!(seen, [20, 12, 21, 10, 20, 11]);
        assert_eq!(
            std::mem::take(&mut *asked.lock().unwrap()),
            one_ask("select-run"),
            "set a's picks were all served from its runs; set b needed one ask"
        );
        // Another thread holds runs of its own (the rotation's picks 16 to 31, this
        // thread holding eight of the first ask's), and hands back what it did not use
        // when it ends.
        let other = std::thread::scope(|s| s.spawn(|| picks(&p, a, 2)).join().unwrap());
        assert_eq!(other, [11, 12]);
        // This thread leaves set a, handing back its eight after the other thread's
        // fourteen, and comes back: its next pick of the set is the first of those.
        assert_eq!(picks(&p, b, 1), [21]);
        assert_eq!(picks(&p, a, 1), [10]);
        assert_eq!(*asked.lock().unwrap(), one_ask("select-run"), "the other's");
        // The call itself, run or not (`axle bench plugins`): the plugin's own next pick,
        // after the 32 its runs made.
        asked.lock().unwrap().clear();
        assert_eq!(p.ask(a, 7).map(|s| s.endpoint), Some(12));
        assert_eq!(*asked.lock().unwrap(), ["select"]);
    }

    /// Threads that move between sets at every few picks, on every core: each pick the
    /// plugin made is either served once or still waiting in its set once they end, so
    /// the rotation's shares stay exact.
    #[test]
    fn threads_moving_between_sets_serve_every_pick_the_plugin_made_once() {
        let (p, asked) = rotation();
        let (a, b) = (p.intern_set(&[1, 2, 3]), p.intern_set(&[4, 5]));
        let served: Vec<Vec<u32>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4usize)
                .map(|t| {
                    let p = &p;
                    s.spawn(move || {
                        let mut served = Vec::new();
                        for i in 0..2_000usize {
                            // Runs of 1 to 5 picks of one set, then the other.
                            let set = if (i / (1 + (i + t) % 5)) % 2 == 0 {
                                a
                            } else {
                                b
                            };
                            served.push(p.select(set, 0).expect("a pick").endpoint);
                        }
                        served
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        // Every thread has ended, so what it held is back in its set.
        let left = |set: u32| {
            let mut picks = Vec::new();
            while let Some(runs) = p
                .pool
                .peek(|m| m.sets.get(&set).and_then(|s| s.run.take_left::<1>()))
                .flatten()
            {
                for mut run in runs {
                    while let Some(pick) = axle_spi::next_in_run(&mut run) {
                        picks.push(pick);
                    }
                }
            }
            picks
        };
        let mut count = [0usize; 6];
        for pick in served
            .iter()
            .flatten()
            .copied()
            .chain(left(a))
            .chain(left(b))
        {
            count[pick as usize] += 1;
        }
        // The rotation made whole runs of four, cycling its members: their counts differ
        // by one at most.
        let (sa, sb) = (&count[1..=3], &count[4..=5]);
        let spread = |c: &[usize]| c.iter().max().unwrap() - c.iter().min().unwrap();
        assert!(spread(sa) <= 1, "set a: {sa:?}");
        assert!(spread(sb) <= 1, "set b: {sb:?}");
        assert_eq!(served.iter().map(Vec::len).sum::<usize>(), 8_000);
        // Nothing lost, nothing served twice: four picks a call, each counted once.
        let made = 4 * asked.lock().unwrap().len();
        assert_eq!(sa.iter().sum::<usize>() + sb.iter().sum::<usize>(), made);
    }

    #[test]
    fn a_redefined_or_forgotten_set_takes_its_picks_made_ahead_with_it() {
        let (p, asked) = rotation();
        p.define_set(0, vec![1, 2, 3]);
        assert_eq!(picks(&p, 0, 1), [1]);
        // The same id, other members: what the old run still held is not served.
        p.define_set(0, vec![7, 8]);
        assert_eq!(picks(&p, 0, 3), [7, 8, 7]);
        // A new table forgets every set: so are their runs.
        p.endpoints_changed(&axle_spi::EndpointTable::default());
        asked.lock().unwrap().clear();
        assert_eq!(p.select(0, 0), None, "set 0 is forgotten");
        assert!(asked.lock().unwrap().is_empty(), "no set, no call");
    }

    #[test]
    fn a_run_naming_an_endpoint_outside_the_set_is_void_and_counted() {
        // A run of picks, and a run of pairs.
        for pairs in [false, true] {
            let (p, _, asked) = cycle(pairs, true, false);
            let set = p.intern_set(&[1, 2]);
            for _ in 0..4 {
                let pick = p.select(set, 0).expect("the kernel's random pick");
                assert!(!pick.by_plugin);
                assert!([1, 2].contains(&pick.endpoint));
            }
            assert_eq!(p.counters().stats.invalid, 4, "pairs: {pairs}");
            // A run shorter than a full one ends its ask: one call a pick.
            assert_eq!(asked.lock().unwrap().len(), 4, "pairs: {pairs}");
        }
    }

    fn busy(cell: &axle_facts::EndpointCell, calls: usize) {
        (0..calls).for_each(|_| cell.started());
    }

    #[test]
    fn pairs_made_ahead_are_compared_by_the_loads_when_they_are_taken() {
        let (p, cells, asked) = pairs(false);
        assert!(p.pairs() && !p.runs());
        let set = p.intern_set(&[1, 2, 3]);
        busy(&cells[0], 5);
        // The run: (1, 2) and (2, 3). Endpoint 1 is busy: 2.
        assert_eq!(picks(&p, set, 1), [2]);
        // Endpoint 2 turns busier before the second pair is taken: 3, not 2.
        busy(&cells[1], 10);
        assert_eq!(picks(&p, set, 1), [3]);
        assert_eq!(
            std::mem::take(&mut *asked.lock().unwrap()),
            one_ask("select-two-run"),
            "eight pairs, one ask"
        );
        // The next pairs: (3, 1), then (1, 2), by the loads of now (1: 5, 2: 10, 3: 0).
        assert_eq!(picks(&p, set, 2), [3, 1]);
        assert!(asked.lock().unwrap().is_empty(), "still the same ask's");
        // The call itself (`axle bench plugins`): one pair, compared at once, after the
        // eight the ask drew.
        assert_eq!(p.ask(set, 7).map(|s| s.endpoint), Some(3)); // (3, 1): 1 is busy
        assert_eq!(*asked.lock().unwrap(), ["select-two"]);
    }

    #[test]
    fn a_pair_left_by_a_thread_is_taken_whole_by_the_next() {
        let (p, cells, asked) = pairs(false);
        let (a, b) = (p.intern_set(&[1, 2, 3]), p.intern_set(&[2, 3]));
        // Another thread takes the first pair, (1, 2), and ends holding (2, 3): handed
        // back to the set whole.
        let other = std::thread::scope(|s| s.spawn(|| picks(&p, a, 1)).join().unwrap());
        assert_eq!(other, [1]);
        busy(&cells[1], 3);
        // This thread's pick of the set is that pair, compared now: 3.
        assert_eq!(picks(&p, a, 1), [3]);
        assert_eq!(*asked.lock().unwrap(), one_ask("select-two-run"));
        // Set b has pairs of its own; this thread hands set a's back as it leaves, and
        // takes them again when it comes back: the next, (3, 1), both idle, the first.
        assert_eq!(picks(&p, b, 1), [3]); // (2, 3)
        assert_eq!(picks(&p, a, 1), [3]);
        assert_eq!(
            *asked.lock().unwrap(),
            [one_ask("select-two-run"); 2].concat()
        );
    }

    #[test]
    fn a_two_choice_selector_without_runs_is_asked_for_a_pair() {
        let (p, cells, asked) = pairs(true);
        let set = p.intern_set(&[1, 2, 3]);
        busy(&cells[0], 1);
        assert_eq!(picks(&p, set, 1), [2]); // (1, 2) by `select-two`
        assert_eq!(*asked.lock().unwrap(), ["select-two-run", "select-two"]);
    }
}
