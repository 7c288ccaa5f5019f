//! The fault script, expanded into primitive actions on a timeline: a `kill` with
//! `for-s` is a kill then a start, a rolling restart is one kill and start per member, a
//! `half-dead` for a while is a hang share set and cleared. The engine only ever applies
//! [`Action`]s.

use axle_client::health::HealthChange;
use axle_client::CallError;
use axle_transport::TransportError;

use crate::engine::{ns, Engine, Ev};
use crate::scenario::{FaultKind, Scenario};

/// One primitive change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// The process dies: connections refused, calls in flight fail.
    Kill(usize),
    /// The process starts (again).
    Start(usize),
    /// Share of calls that hang (0: none).
    Hang(usize, f64),
    /// Service time factor (1: normal).
    Slow(usize, f64),
    /// Unreachable over the network, or reachable again.
    Partition(usize, bool),
    /// Capacity cut to this, or back to the configured one.
    Slots(usize, Option<u32>),
    /// Discovery stops (true) or resumes (false) updating the endpoint list.
    DiscoveryOutage(bool),
}

/// The providers of `group`'s `members` (all when `None`), as global indexes.
fn targets(s: &Scenario, group: &str, members: Option<&Vec<u32>>) -> Vec<usize> {
    let mut first = 0usize;
    for g in &s.providers {
        if g.name == group {
            return match members {
                Some(m) => m.iter().map(|i| first + *i as usize).collect(),
                None => (first..first + g.count as usize).collect(),
            };
        }
        first += g.count as usize;
    }
    Vec::new()
}

/// Every action of the script with its virtual time (ns), in time order (ties keep the
/// script's order).
pub fn timeline(s: &Scenario) -> Vec<(u64, Action)> {
    let ns = |secs: f64| (secs * 1e9) as u64;
    let mut out = Vec::new();
    for f in &s.faults {
        let at = ns(f.at_s);
        let end = f.for_s.map(|d| at + ns(d));
        if f.kind == FaultKind::DiscoveryOutage {
            out.push((at, Action::DiscoveryOutage(true)));
            out.extend(end.map(|e| (e, Action::DiscoveryOutage(false))));
            continue;
        }
        let who = targets(s, f.group.as_deref().unwrap_or(""), f.members.as_ref());
        for (k, p) in who.into_iter().enumerate() {
            let (start, undo) = match f.kind {
                FaultKind::Kill => (Action::Kill(p), Some(Action::Start(p))),
                FaultKind::Restart => {
                    out.push((at, Action::Kill(p)));
                    (Action::Start(p), None)
                }
                FaultKind::HalfDead => (
                    Action::Hang(p, f.share.unwrap_or(0.0)),
                    Some(Action::Hang(p, 0.0)),
                ),
                FaultKind::Slow => (
                    Action::Slow(p, f.factor.unwrap_or(1.0)),
                    Some(Action::Slow(p, 1.0)),
                ),
                FaultKind::Partition => (
                    Action::Partition(p, true),
                    Some(Action::Partition(p, false)),
                ),
                FaultKind::Overload => (Action::Slots(p, f.capacity), Some(Action::Slots(p, None))),
                FaultKind::RollingRestart => {
                    let t = at + ns(f.every_s.unwrap_or(0.0)) * k as u64;
                    out.push((t, Action::Kill(p)));
                    out.push((t + ns(f.down_s.unwrap_or(0.0)), Action::Start(p)));
                    continue;
                }
                FaultKind::DiscoveryOutage => unreachable!("handled above"),
            };
            out.push((at, start));
            if let (Some(e), Some(undo)) = (end, undo) {
                out.push((e, undo));
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

impl Engine<'_> {
    /// Applies one action of the script at the engine's current time.
    pub(crate) fn apply(&mut self, action: Action) {
        self.rec.fault(self.now, &action, &self.providers);
        match action {
            Action::Kill(p) => {
                let notice = (self.s.connection_close_ms * 1e6) as u64;
                for att in self.providers[p].kill(self.now, notice) {
                    let addr = self.providers[p].address.clone();
                    let reason = "connection closed".into();
                    self.result(
                        att,
                        Err(CallError::Transport(TransportError::Reset { addr, reason })),
                    );
                }
                self.at(self.now + notice, Ev::Closed { p: p as u32 });
                if self.s.discovery_ttl_s > 0.0 {
                    let t = self.now + ns(self.s.discovery_ttl_s);
                    self.at(
                        t,
                        Ev::Listing {
                            p: p as u32,
                            listed: false,
                        },
                    );
                }
            }
            Action::Start(p) => {
                let now_ms = self.now / 1_000_000;
                self.providers[p].restart(now_ms);
                if self.s.discovery_ttl_s > 0.0 && !self.kernels[0].endpoints[p].listed {
                    self.at(
                        self.now,
                        Ev::Listing {
                            p: p as u32,
                            listed: true,
                        },
                    );
                }
            }
            Action::Hang(p, share) => self.providers[p].hang_share = share,
            Action::Slow(p, f) => self.providers[p].slow = f,
            Action::Partition(p, on) => self.providers[p].partitioned = on,
            Action::Slots(p, slots) => self.providers[p].set_slots(slots),
            Action::DiscoveryOutage(on) => {
                self.discovery_held = on;
                if !on {
                    for (p, listed) in std::mem::take(&mut self.held) {
                        self.listing(p, listed);
                    }
                }
            }
        }
    }

    /// The callers' connections to killed provider `p` closed: the re-dial is refused,
    /// so it is unreachable and out of rotation (unless it was started again meanwhile).
    pub(crate) fn closed(&mut self, p: usize) {
        if self.providers[p].up {
            return;
        }
        for k in &mut self.kernels {
            if k.endpoints[p].health.mark_unreachable() {
                k.publish(&self.providers);
                let change = [(p as u32, HealthChange::Unreachable)];
                self.rec.health(self.now, &change, &self.providers);
            }
        }
    }

    /// Discovery lists (or drops) provider `p`; held during an outage.
    pub(crate) fn listing(&mut self, p: u32, listed: bool) {
        if self.discovery_held {
            self.held.push((p, listed));
            return;
        }
        // Dropped only if still down, listed only if up: the latest state wins.
        let up = self.providers[p as usize].up;
        if listed != up {
            return;
        }
        if self.kernels[0].endpoints[p as usize].listed == listed {
            return;
        }
        for k in &mut self.kernels {
            let ep = &mut k.endpoints[p as usize];
            ep.listed = listed;
            if listed {
                // A new process: judged on what it does from now on.
                axle_client::health::redial::readmit_parts(&ep.cell, &ep.breaker, &ep.health);
            }
            k.publish(&self.providers);
        }
        self.rec.listing(self.now, p, listed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(faults: &str) -> Scenario {
        Scenario::parse(&format!(
            r#"
duration-s = 100
[arrivals]
kind = "constant"
rate-per-s = 10
[[providers]]
name = "a"
count = 2
latency = {{ kind = "constant", ms = 1 }}
[[providers]]
name = "b"
count = 3
latency = {{ kind = "constant", ms = 1 }}
{faults}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_kill_for_a_while_restarts() {
        let s = scenario(
            "[[faults]]\nat-s = 2\nkind = \"kill\"\ngroup = \"b\"\nmembers = [1]\nfor-s = 3\n",
        );
        assert_eq!(
            timeline(&s),
            vec![
                (2_000_000_000, Action::Kill(3)),
                (5_000_000_000, Action::Start(3))
            ]
        );
    }

    #[test]
    fn a_rolling_restart_goes_one_after_another() {
        let s = scenario(
            "[[faults]]\nat-s = 10\nkind = \"rolling-restart\"\ngroup = \"b\"\nevery-s = 5\ndown-s = 2\n",
        );
        let t = timeline(&s);
        assert_eq!(t.len(), 6);
        assert_eq!(t[0], (10_000_000_000, Action::Kill(2)));
        assert_eq!(t[1], (12_000_000_000, Action::Start(2)));
        assert_eq!(t[2], (15_000_000_000, Action::Kill(3)));
        assert_eq!(t[5], (22_000_000_000, Action::Start(4)));
    }

    #[test]
    fn half_dead_and_outage_are_undone() {
        let s = scenario(
            "[[faults]]\nat-s = 1\nkind = \"half-dead\"\ngroup = \"a\"\nmembers = [0]\nshare = 0.4\nfor-s = 1\n\
             [[faults]]\nat-s = 0\nkind = \"discovery-outage\"\n",
        );
        assert_eq!(
            timeline(&s),
            vec![
                (0, Action::DiscoveryOutage(true)),
                (1_000_000_000, Action::Hang(0, 0.4)),
                (2_000_000_000, Action::Hang(0, 0.0)),
            ]
        );
    }
}
