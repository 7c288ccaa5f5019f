//! A simulated provider: a service-time distribution, a number of slots served at once
//! and a FIFO queue behind them (so overload builds latency, as a real thread pool or
//! `max-concurrent` queue does), and the state the fault script sets (down, partitioned,
//! half-dead, slow, overloaded).

use std::collections::{BTreeSet, VecDeque};

use crate::rng::Rng;
use crate::scenario::{Latency, ProviderGroup};

/// z of the 99th percentile of a standard normal.
const Z99: f64 = 2.326_347_874;

/// One provider.
#[derive(Debug)]
pub struct Provider {
    /// `GROUP-INDEX`.
    pub name: String,
    pub group: usize,
    /// `sim://GROUP-INDEX`: what discovery lists and plugins see.
    pub address: String,
    pub tags: Vec<(String, String)>,
    pub weight: u32,
    pub warmup_ms: u64,
    latency: Latency,
    error_rate: f64,
    capacity: u32,
    /// Slots now (an `overload` fault cuts it).
    pub slots: u32,
    /// Running: accepts connections.
    pub up: bool,
    /// Unreachable over the network (calls and heartbeats go unanswered).
    pub partitioned: bool,
    /// Share of calls that hang until the caller gives up (half-dead).
    pub hang_share: f64,
    /// Service time multiplied by this (slow).
    pub slow: f64,
    /// Bumped when it is killed: answers due from before are never delivered.
    pub epoch: u32,
    /// Killed: until this virtual ns its callers' connections have not noticed, and a
    /// request written into one is reset.
    pub closing_until: u64,
    /// Virtual ms it (re)started at: warm-up counts from there.
    pub started_ms: u64,
    busy: u32,
    queue: VecDeque<u32>,
    /// Attempts it holds (running or queued), for a kill to fail them.
    holding: BTreeSet<u32>,
}

/// What happens to a request sent to a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrive {
    /// Connection refused: the process is gone.
    Refused,
    /// Written into a connection to a process that just died: reset.
    Reset,
    /// No answer ever (partitioned, or a half-dead provider's hung call).
    Hang,
    /// Served: the answer is due at this virtual ns, an `internal` error or not.
    Start { done_ns: u64, error: bool },
    /// Waiting for a slot.
    Queued,
}

impl Provider {
    pub fn new(group: usize, spec: &ProviderGroup, index: u32) -> Provider {
        let name = format!("{}-{index}", spec.name);
        let mut tags: Vec<(String, String)> = spec.tags.clone().into_iter().collect();
        if let Some(zone) = &spec.zone {
            tags.retain(|(k, _)| k != "zone");
            tags.push(("zone".into(), zone.clone()));
            tags.sort();
        }
        Provider {
            address: format!("sim://{name}"),
            name,
            group,
            tags,
            weight: spec.weight,
            warmup_ms: (spec.warmup_s * 1000.0) as u64,
            latency: spec.latency,
            error_rate: spec.error_rate,
            capacity: spec.capacity,
            slots: spec.capacity,
            up: true,
            partitioned: false,
            hang_share: 0.0,
            slow: 1.0,
            epoch: 0,
            closing_until: 0,
            started_ms: 0,
            busy: 0,
            queue: VecDeque::new(),
            holding: BTreeSet::new(),
        }
    }

    /// One service time (ns), slowness included.
    pub fn service_ns(&self, rng: &mut Rng) -> u64 {
        let ms = match self.latency {
            Latency::Constant { ms } => ms,
            Latency::Uniform { min_ms, max_ms } => min_ms + (max_ms - min_ms) * rng.f64(),
            Latency::Lognormal { p50_ms, p99_ms } => {
                let sigma = (p99_ms / p50_ms).ln() / Z99;
                p50_ms * (sigma * rng.normal()).exp()
            }
        };
        (ms * self.slow * 1e6).max(0.0) as u64
    }

    /// Attempt `attempt` reaches the provider at `now`.
    pub fn arrive(&mut self, attempt: u32, now: u64, rng: &mut Rng) -> Arrive {
        if !self.up {
            return if now < self.closing_until {
                Arrive::Reset
            } else {
                Arrive::Refused
            };
        }
        // Held even when it hangs: a kill resets every request on the connection.
        self.holding.insert(attempt);
        if self.partitioned || (self.hang_share > 0.0 && rng.f64() < self.hang_share) {
            return Arrive::Hang;
        }
        if self.busy < self.slots {
            self.busy += 1;
            return self.start(now, rng);
        }
        self.queue.push_back(attempt);
        Arrive::Queued
    }

    fn start(&mut self, now: u64, rng: &mut Rng) -> Arrive {
        let done_ns = now + self.service_ns(rng);
        let error = self.error_rate > 0.0 && rng.f64() < self.error_rate;
        Arrive::Start { done_ns, error }
    }

    /// Attempt `attempt` finished at `now`: its slot goes to the first queued attempt
    /// still wanted (`wanted` says whether its caller still waits), returned with its
    /// answer's due time.
    pub fn finish(
        &mut self,
        attempt: u32,
        now: u64,
        rng: &mut Rng,
        mut wanted: impl FnMut(u32) -> bool,
    ) -> Option<(u32, Arrive)> {
        self.holding.remove(&attempt);
        self.busy = self.busy.saturating_sub(1);
        while self.busy < self.slots {
            let next = self.queue.pop_front()?;
            if !wanted(next) {
                // Cancelled while queued: the caller gave up (its `cancel` frame).
                self.holding.remove(&next);
                continue;
            }
            self.busy += 1;
            return Some((next, self.start(now, rng)));
        }
        None
    }

    /// Killed at `now`, its callers noticing `notice_ns` later: every attempt it held
    /// fails (returned), nothing it was doing answers.
    pub fn kill(&mut self, now: u64, notice_ns: u64) -> Vec<u32> {
        self.up = false;
        self.closing_until = now + notice_ns;
        self.epoch = self.epoch.wrapping_add(1);
        self.busy = 0;
        self.queue.clear();
        std::mem::take(&mut self.holding).into_iter().collect()
    }

    /// Started again at `now_ms`, with its configured capacity and none of the faults
    /// a process restart clears (slowness and hangs of the old process).
    pub fn restart(&mut self, now_ms: u64) {
        self.up = true;
        self.slots = self.capacity;
        self.hang_share = 0.0;
        self.slow = 1.0;
        self.started_ms = now_ms;
    }

    /// Capacity cut to `slots` (an overload), or back to the configured one (`None`).
    pub fn set_slots(&mut self, slots: Option<u32>) {
        self.slots = slots.unwrap_or(self.capacity).max(1);
    }

    /// Whether a heartbeat or a probe would be answered now.
    pub fn answers(&self) -> bool {
        self.up && !self.partitioned
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(capacity: u32) -> ProviderGroup {
        ProviderGroup {
            name: "p".into(),
            count: 1,
            latency: Latency::Constant { ms: 10.0 },
            capacity,
            zone: Some("a".into()),
            weight: 100,
            warmup_s: 0.0,
            error_rate: 0.0,
            tags: Default::default(),
        }
    }

    #[test]
    fn overload_builds_a_queue_served_in_order() {
        let mut p = Provider::new(0, &group(2), 0);
        let mut rng = Rng::new(1);
        assert_eq!(p.tags, vec![("zone".to_string(), "a".to_string())]);
        let a = p.arrive(1, 0, &mut rng);
        assert_eq!(
            a,
            Arrive::Start {
                done_ns: 10_000_000,
                error: false
            }
        );
        p.arrive(2, 0, &mut rng);
        assert_eq!(p.arrive(3, 0, &mut rng), Arrive::Queued);
        assert_eq!(p.arrive(4, 0, &mut rng), Arrive::Queued);
        assert_eq!(p.queued(), 2);
        // 3 gave up while queued: 4 gets the slot, and finishes 10 ms after it got it.
        let next = p.finish(1, 10_000_000, &mut rng, |a| a != 3);
        assert_eq!(
            next,
            Some((
                4,
                Arrive::Start {
                    done_ns: 20_000_000,
                    error: false
                }
            ))
        );
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn a_killed_provider_fails_what_it_held_and_refuses() {
        let mut p = Provider::new(0, &group(1), 0);
        let mut rng = Rng::new(1);
        p.arrive(1, 0, &mut rng);
        p.arrive(2, 0, &mut rng);
        assert_eq!(p.kill(10, 5), vec![1, 2]);
        assert_eq!(p.arrive(3, 12, &mut rng), Arrive::Reset, "not noticed yet");
        assert_eq!(p.arrive(3, 15, &mut rng), Arrive::Refused);
        assert!(!p.answers());
        p.restart(5);
        assert!(p.answers());
        assert!(matches!(p.arrive(3, 0, &mut rng), Arrive::Start { .. }));
    }

    #[test]
    fn lognormal_latency_has_its_median_and_p99() {
        let mut spec = group(1);
        spec.latency = Latency::Lognormal {
            p50_ms: 5.0,
            p99_ms: 50.0,
        };
        let p = Provider::new(0, &spec, 0);
        let mut rng = Rng::new(3);
        let mut v: Vec<u64> = (0..20_000).map(|_| p.service_ns(&mut rng)).collect();
        v.sort_unstable();
        let (p50, p99) = (v[10_000] as f64 / 1e6, v[19_800] as f64 / 1e6);
        assert!((4.5..5.5).contains(&p50), "{p50}");
        assert!((42.0..58.0).contains(&p99), "{p99}");
    }

    #[test]
    fn a_half_dead_provider_hangs_its_share() {
        let mut p = Provider::new(0, &group(1000), 0);
        p.hang_share = 0.4;
        let mut rng = Rng::new(9);
        let hung = (0..10_000)
            .filter(|i| p.arrive(*i, 0, &mut rng) == Arrive::Hang)
            .count();
        assert!((3_700..4_300).contains(&hung), "{hung}");
    }
}
