//! A run-selector's picks (WIT `run-selector`): the kernel asks `select-run` for up to four
//! picks, uses the first, and keeps the rest in the set ([`Run`]) for the next calls from
//! any thread, in the plugin's order. A thread remembers the set it took from last, so a
//! pick made ahead takes neither the plugin's lock nor a lookup of the set.

use std::sync::Arc;

use super::{random_pick, wire_id, Member, Runner, Selection, SelectorPlugin, SetMembers};
use crate::stats::Fault;

thread_local! {
    /// The set this thread took a run-selector's pick from last, by selector: the next
    /// pick of the same set takes from its run without the plugin's lock.
    static LAST_RUN: std::cell::RefCell<Option<(u64, u32, Arc<SetMembers>)>> =
        const { std::cell::RefCell::new(None) };
}

impl SelectorPlugin {
    /// A run-selector's pick (see [`SelectorPlugin::select`]).
    pub(super) fn select_from_run(&self, id: u32) -> Option<Selection> {
        let made_ahead = LAST_RUN.with_borrow(|last| match last {
            Some((selector, set, members)) if *selector == self.id && *set == id => {
                members.run.take()
            }
            _ => None,
        });
        if let Some(endpoint) = made_ahead {
            return Some(by_plugin(endpoint));
        }
        match self.pool.with(|member| member.select_run(id)) {
            Ok(Some((selection, members))) => {
                LAST_RUN.set(Some((self.id, id, members)));
                Some(selection)
            }
            Ok(None) => None,
            Err(Fault::Quarantined) => self.quarantined(id),
            Err(_) => None,
        }
    }
}

impl Member {
    /// Picks from set `id` for a run-selector: a pick another thread's run left, or the
    /// first of a new run, whose other picks wait in the set for the next calls. Each pick
    /// of a run is checked against the set; one outside it voids the run (a fault).
    fn select_run(&mut self, id: u32) -> Option<(Selection, Arc<SetMembers>)> {
        let set = self
            .sets
            .get(&id)
            .filter(|set| !set.ids.is_empty())?
            .clone();
        if let Some(endpoint) = set.run.take() {
            return Some((by_plugin(endpoint), set));
        }
        let live = self.ensure();
        let run = live.and_then(|()| self.runner.select_run(id));
        let mut rest = match run {
            Ok(run) => run,
            Err(_) => return Some((random_pick(&set.ids), set)),
        };
        let mut picks = rest;
        while let Some(pick) = axle_spi::next_in_run(&mut picks) {
            if !set.members.contains(pick) {
                let fault = Fault::Invalid(format!("endpoint {pick} is not in set {id}"));
                self.runner.fault(&self.stats, "select-run", &fault);
                return Some((random_pick(&set.ids), set));
            }
        }
        let Some(endpoint) = axle_spi::next_in_run(&mut rest) else {
            // No run: one pick, as a plain selector is asked.
            let selection = self.select(id, 0, None)?;
            return Some((selection, set));
        };
        set.run.refill(rest);
        Some((by_plugin(endpoint), set))
    }
}

/// A pick the plugin made.
fn by_plugin(endpoint: u32) -> Selection {
    Selection {
        endpoint,
        by_plugin: true,
    }
}

impl Runner {
    fn select_run(&mut self, id: u32) -> Result<u64, Fault> {
        match self {
            Runner::Wasm(inst) => inst.call("select-run", |b, s| match &b.select_run {
                Some(f) => f.call(s, (wire_id(id),)).map(|(run,)| run),
                None => Err(wasmtime::format_err!(
                    "the component exports no `select-run`"
                )),
            }),
            Runner::Native(twin) => Ok(twin.select_run(wire_id(id))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::NativeSelector;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// A rotation over each set's members that counts what it was asked, or (`stray`)
    /// one whose runs name an endpoint outside the set.
    struct Rotation {
        sets: HashMap<u32, (Vec<u32>, usize)>,
        asked: Arc<Mutex<Vec<&'static str>>>,
        stray: bool,
    }

    impl Rotation {
        fn pick(&mut self, id: u32) -> Option<u32> {
            let (members, next) = self.sets.get_mut(&id)?;
            let pick = members[*next % members.len()];
            *next += 1;
            Some(pick)
        }
    }

    impl NativeSelector for Rotation {
        fn endpoints_changed(&mut self, _table: axle_spi::EndpointTable) {}
        fn define_set(&mut self, id: u32, members: Vec<u32>) {
            self.sets.insert(id, (members, 0));
        }
        fn select(&mut self, id: u32, _hash_key: u64) -> Option<u32> {
            self.asked.lock().unwrap().push("select");
            self.pick(id)
        }
        fn wants_runs(&self) -> bool {
            true
        }
        fn select_run(&mut self, id: u32) -> u64 {
            self.asked.lock().unwrap().push("select-run");
            if self.stray {
                return axle_spi::pack_run([99]);
            }
            let picks: Vec<u32> = (0..axle_spi::RUN).filter_map(|_| self.pick(id)).collect();
            axle_spi::pack_run(picks)
        }
    }

    fn rotation(stray: bool) -> (SelectorPlugin, Arc<Mutex<Vec<&'static str>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let twin = Rotation {
            sets: HashMap::new(),
            asked: asked.clone(),
            stray,
        };
        let owner = crate::pool::Owner::named("rotation");
        let plugin = SelectorPlugin::native(Box::new(twin), owner, axle_facts::FactsTable::new());
        (plugin, asked)
    }

    fn picks(p: &SelectorPlugin, set: u32, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| p.select(set, 7).expect("a pick").endpoint)
            .collect()
    }

    #[test]
    fn a_run_serves_the_next_picks_in_the_plugins_order_with_one_call() {
        let (p, asked) = rotation(false);
        assert!(p.runs());
        let (a, b) = (p.intern_set(&[10, 11, 12]), p.intern_set(&[20, 21]));
        assert_eq!(picks(&p, a, 5), [10, 11, 12, 10, 11]);
        assert_eq!(
            std::mem::take(&mut *asked.lock().unwrap()),
            ["select-run", "select-run"]
        );
        // A thread moving between sets drops no pick: each set keeps its own run, and
        // its rotation goes on where it was.
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(picks(&p, b, 1)[0]);
            seen.push(picks(&p, a, 1)[0]);
        }
        assert_eq!(seen, [20, 12, 21, 10, 20, 11]);
        // Another thread takes from the same run: the set's picks stay in order.
        let other = std::thread::scope(|s| s.spawn(|| picks(&p, a, 2)).join().unwrap());
        assert_eq!(other, [12, 10]);
        assert_eq!(picks(&p, a, 1), [11]);
        // The call itself, run or not (`axle bench plugins`): the plugin's own next pick,
        // after the ones its runs made (the set's run still holds 12).
        asked.lock().unwrap().clear();
        assert_eq!(p.ask(a, 7).map(|s| s.endpoint), Some(10));
        assert_eq!(*asked.lock().unwrap(), ["select"]);
    }

    #[test]
    fn a_redefined_or_forgotten_set_takes_its_picks_made_ahead_with_it() {
        let (p, asked) = rotation(false);
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
        let (p, _) = rotation(true);
        let set = p.intern_set(&[1, 2]);
        for _ in 0..4 {
            let pick = p.select(set, 0).expect("the kernel's random pick");
            assert!(!pick.by_plugin);
            assert!([1, 2].contains(&pick.endpoint));
        }
        assert_eq!(p.counters().stats.invalid, 4);
    }
}
