//! A circuit breaker (per service+method and per endpoint on the caller's side).
//!
//! Closed: calls flow; it opens on N consecutive failures, or — once the window holds the
//! minimum number of calls — on a failure rate or a slow-call rate. Open: calls fail fast,
//! touching neither discovery, plugins nor the network. After the break, half-open: a
//! bounded number of probes go through; if all succeed it closes, the first failure opens
//! it again.
//!
//! Every permit is given back: [`Breaker::pass`] hands out a [`Pass`] that records the
//! call's verdict, or — dropped without one (a hedge's loser, a caller that stopped
//! waiting, a cancelled call) — releases its probe slot, so a half-open breaker never
//! waits for probes that will not report. A probe reports to the half-open round it was
//! admitted in only: one that outlives its round (the breaker opened again meanwhile)
//! counts for nothing.
//!
//! What counts (the caller classifies, see `client::stages::feedback`): transport failures,
//! timeouts, `deadline_exceeded` and `internal` are failures. `business` errors are
//! successes (the endpoint worked). Refusals that say nothing about health —
//! `overloaded`, `shutting_down`, `rate_limited`, `not_found`, `bad_request`, `forbidden` —
//! are not counted at all.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use axle_core::now_ns;
use axle_core::striped::Striped;

use super::Governance;

/// The thresholds of one breaker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    pub enabled: bool,
    pub consecutive_failures: u32,
    pub failure_rate: f64,
    pub slow_rate: f64,
    pub slow_call: Option<Duration>,
    pub min_requests: u32,
    pub window: Duration,
    pub break_for: Duration,
    pub half_open_probes: u32,
}

impl From<&Governance> for BreakerConfig {
    fn from(g: &Governance) -> Self {
        BreakerConfig {
            enabled: g.breaker,
            consecutive_failures: g.breaker_consecutive_failures,
            failure_rate: g.breaker_failure_rate,
            slow_rate: g.breaker_slow_rate,
            slow_call: (g.breaker_slow_call_ms > 0)
                .then(|| Duration::from_millis(g.breaker_slow_call_ms)),
            min_requests: g.breaker_min_requests,
            window: Duration::from_millis(g.breaker_window_ms),
            break_for: Duration::from_millis(g.break_ms),
            half_open_probes: g.half_open_probes,
        }
    }
}

/// The breaker's state, for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

/// May a call go through?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permit {
    /// Closed: go.
    Allowed,
    /// Half-open: go, as one of the probes of half-open round `round`.
    Probe { round: u32 },
    /// Open (or all probes taken): fail fast.
    Rejected,
}

/// How a finished call counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success {
        slow: bool,
    },
    Failure,
    /// Says nothing about health (a refusal).
    Ignored,
}

enum Mode {
    Closed,
    Open {
        /// Kernel-clock nanoseconds (`axle_core::now_ns`, virtual under `axle sim`).
        until: u64,
    },
    HalfOpen {
        round: u32,
        admitted: u32,
        succeeded: u32,
    },
}

struct State {
    mode: Mode,
    /// Kernel-clock nanoseconds.
    window_start: u64,
    failures: u32,
    slow: u32,
    /// The calls counted when the window started. The counts are never set back, so each
    /// thread's has one writer (`axle_core::striped`).
    counted_before: u64,
    /// Half-open rounds so far (names the round a probe belongs to).
    rounds: u32,
}

/// One circuit breaker.
///
/// The closed state's common path — a call let through, a success recorded — touches only
/// atomics; the lock is taken for failures, slow calls, probes and transitions.
pub struct Breaker {
    name: String,
    config: BreakerConfig,
    /// Fast check: true while the breaker is closed.
    closed: AtomicBool,
    /// Consecutive failures (reset by a success).
    consecutive: AtomicU32,
    /// Calls counted since the breaker was made (the window's are those past
    /// `State::counted_before`): written by every call that ends, from every core, so
    /// kept per thread (`axle_core::striped`) and added up only when a failure or a slow
    /// call is judged. One count on one line made every call wait for that line, and
    /// beside the fields every call only reads (`closed`, `consecutive`, the config) it
    /// made their reads miss too (`docs/performance.md`, "Shared counts", "Counts written
    /// by every core").
    total: Striped<AtomicU64>,
    state: Mutex<State>,
    opened: AtomicU64,
}

impl Breaker {
    pub fn new(name: impl Into<String>, config: BreakerConfig) -> Self {
        Breaker {
            name: name.into(),
            config,
            closed: AtomicBool::new(true),
            consecutive: AtomicU32::new(0),
            total: Striped::default(),
            state: Mutex::new(State {
                mode: Mode::Closed,
                window_start: now_ns(),
                failures: 0,
                slow: 0,
                counted_before: 0,
                rounds: 0,
            }),
            opened: AtomicU64::new(0),
        }
    }

    /// How many times it has opened.
    pub fn times_opened(&self) -> u64 {
        self.opened.load(Relaxed)
    }

    /// The state now.
    pub fn state(&self) -> BreakerState {
        match self.lock().mode {
            Mode::Closed => BreakerState::Closed,
            Mode::Open { until } if now_ns() < until => BreakerState::Open,
            Mode::Open { .. } | Mode::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Closes the breaker with a clean record: the health monitor's probe showed the
    /// endpoint answering again, which is what half-open probes would have found out.
    pub fn reset(&self) {
        let mut s = self.lock();
        s.mode = Mode::Closed;
        s.window_start = now_ns();
        s.failures = 0;
        s.slow = 0;
        self.consecutive.store(0, Relaxed);
        self.forget_total(&mut s);
        self.closed.store(true, Relaxed);
    }

    /// Starts the window's count again: what every thread has counted so far is before it.
    fn forget_total(&self, s: &mut State) {
        s.counted_before = self.total.sum(|t| t);
    }

    /// One more call in the window, counted by this thread.
    fn count(&self) {
        let (total, writers) = self.total.local_counts();
        writers.add(total, 1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks to let a call through. The permit must come back through
    /// [`Breaker::record`] or [`Breaker::release`]; [`Breaker::pass`] makes sure it does.
    pub fn try_acquire(&self) -> Permit {
        if !self.config.enabled || self.closed.load(Relaxed) {
            return Permit::Allowed;
        }
        let mut s = self.lock();
        match s.mode {
            Mode::Closed => Permit::Allowed,
            Mode::Open { until } if now_ns() < until => Permit::Rejected,
            Mode::Open { .. } => {
                tracing::info!(breaker = %self.name, "circuit half-open: letting probes through");
                s.rounds = s.rounds.wrapping_add(1);
                let round = s.rounds;
                s.mode = Mode::HalfOpen {
                    round,
                    admitted: 1,
                    succeeded: 0,
                };
                Permit::Probe { round }
            }
            Mode::HalfOpen {
                round,
                ref mut admitted,
                ..
            } => {
                if *admitted < self.config.half_open_probes {
                    *admitted += 1;
                    Permit::Probe { round }
                } else {
                    Permit::Rejected
                }
            }
        }
    }

    /// [`Breaker::try_acquire`] as a guard: `None` when the call must fail fast; else a
    /// pass that records the call's verdict, or gives the permit back if it is dropped
    /// without one.
    pub fn pass(&self) -> Option<Pass<'_>> {
        match self.try_acquire() {
            Permit::Rejected => None,
            permit => Some(Pass {
                breaker: self,
                permit,
            }),
        }
    }

    /// Gives back a permit whose call ended without a verdict (cancelled, or never
    /// sent): a probe's slot is free again; a closed breaker's permit costs nothing.
    pub fn release(&self, permit: Permit) {
        self.record(permit, Verdict::Ignored);
    }

    /// Probes admitted and not yet reported in the current half-open round (0 when not
    /// half-open).
    pub fn probes_out(&self) -> u32 {
        match self.lock().mode {
            Mode::HalfOpen {
                admitted,
                succeeded,
                ..
            } => admitted - succeeded,
            _ => 0,
        }
    }

    /// Records how a call that was let through ended.
    pub fn record(&self, permit: Permit, verdict: Verdict) {
        if !self.config.enabled || permit == Permit::Rejected {
            return;
        }
        if permit == Permit::Allowed {
            // The closed state's common case, without the lock.
            match verdict {
                Verdict::Ignored => return,
                Verdict::Success { slow: false } => {
                    if self.consecutive.load(Relaxed) != 0 {
                        self.consecutive.store(0, Relaxed);
                    }
                    self.count();
                    return;
                }
                Verdict::Success { slow: true } | Verdict::Failure => {}
            }
        }
        let now = now_ns();
        let mut s = self.lock();
        if let Permit::Probe { round: of } = permit {
            if let Mode::HalfOpen {
                round,
                admitted,
                succeeded,
            } = &mut s.mode
            {
                if *round != of {
                    return; // a probe of an earlier round, outlived by it
                }
                match verdict {
                    Verdict::Success { .. } => {
                        *succeeded += 1;
                        if *succeeded >= self.config.half_open_probes {
                            tracing::info!(breaker = %self.name, "circuit closed");
                            s.mode = Mode::Closed;
                            s.window_start = now;
                            s.failures = 0;
                            s.slow = 0;
                            self.consecutive.store(0, Relaxed);
                            self.forget_total(&mut s);
                            self.closed.store(true, Relaxed);
                        }
                    }
                    Verdict::Failure => self.open(&mut s, now, "a probe failed"),
                    Verdict::Ignored => *admitted = admitted.saturating_sub(1),
                }
            }
            return;
        }
        if !matches!(s.mode, Mode::Closed) {
            return; // a call let through before the breaker opened
        }
        // Windows roll over when a failure or a slow call looks at them.
        if now.saturating_sub(s.window_start) > self.config.window.as_nanos() as u64 {
            s.window_start = now;
            s.failures = 0;
            s.slow = 0;
            self.forget_total(&mut s);
        }
        self.count();
        let in_window = self.total.sum(|t| t).saturating_sub(s.counted_before);
        let total = u32::try_from(in_window).unwrap_or(u32::MAX);
        let consecutive = match verdict {
            Verdict::Failure => {
                s.failures += 1;
                self.consecutive.fetch_add(1, Relaxed) + 1
            }
            _ => {
                s.slow += 1;
                self.consecutive.store(0, Relaxed);
                0
            }
        };
        let enough = total >= self.config.min_requests;
        let t = f64::from(total.max(1));
        let reason = if consecutive >= self.config.consecutive_failures {
            Some(format!("{consecutive} consecutive failures"))
        } else if enough && f64::from(s.failures) / t >= self.config.failure_rate {
            Some(format!(
                "failure rate {:.0}% over {total} calls",
                100.0 * f64::from(s.failures) / t
            ))
        } else if enough
            && self.config.slow_call.is_some()
            && f64::from(s.slow) / t >= self.config.slow_rate
        {
            Some(format!(
                "slow-call rate {:.0}% over {total} calls",
                100.0 * f64::from(s.slow) / t
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            self.open(&mut s, now, &reason);
        }
    }

    /// Whether a call of this latency counts as slow.
    pub fn is_slow(&self, latency: Duration) -> bool {
        self.config.slow_call.is_some_and(|t| latency >= t)
    }

    fn open(&self, s: &mut State, now: u64, reason: &str) {
        tracing::warn!(breaker = %self.name, "circuit open for {:?}: {reason}", self.config.break_for);
        self.opened.fetch_add(1, Relaxed);
        self.closed.store(false, Relaxed);
        s.mode = Mode::Open {
            until: now.saturating_add(self.config.break_for.as_nanos() as u64),
        };
    }
}

/// A call let through a breaker: [`Pass::record`] its verdict; dropped without one, its
/// permit is given back ([`Breaker::release`]).
#[must_use = "a pass records the call's verdict, or releases its permit when dropped"]
pub struct Pass<'a> {
    breaker: &'a Breaker,
    permit: Permit,
}

impl Pass<'_> {
    /// What the breaker let through (a probe, or a closed breaker's call).
    pub fn permit(&self) -> Permit {
        self.permit
    }

    /// Records how the call ended.
    pub fn record(self, verdict: Verdict) {
        let this = std::mem::ManuallyDrop::new(self);
        this.breaker.record(this.permit, verdict);
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.breaker.release(self.permit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BreakerConfig {
        BreakerConfig {
            enabled: true,
            consecutive_failures: 3,
            failure_rate: 0.5,
            slow_rate: 0.5,
            slow_call: Some(Duration::from_millis(100)),
            min_requests: 10,
            window: Duration::from_secs(60),
            break_for: Duration::from_millis(30),
            half_open_probes: 2,
        }
    }

    fn fail(b: &Breaker, n: u32) {
        for _ in 0..n {
            let p = b.try_acquire();
            b.record(p, Verdict::Failure);
        }
    }

    /// The window's count is kept per thread; a failure is judged against every
    /// thread's calls, not only its own thread's.
    #[test]
    fn the_failure_rate_counts_calls_from_every_thread() {
        let b = Breaker::new(
            "t",
            BreakerConfig {
                consecutive_failures: 100,
                ..config()
            },
        );
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..3 {
                        let p = b.try_acquire();
                        b.record(p, Verdict::Success { slow: false });
                    }
                });
            }
        });
        // 12 successes elsewhere: 11 failures here are 11 of 23 calls, under half.
        fail(&b, 11);
        assert_eq!(b.state(), BreakerState::Closed);
        fail(&b, 1);
        assert_eq!(b.state(), BreakerState::Open, "12 of 24 calls failed");
        // The counts are never set back (each has one writer): a window starts past them.
        b.reset();
        fail(&b, 9);
        assert_eq!(b.state(), BreakerState::Closed, "9 calls since the reset");
        fail(&b, 1);
        assert_eq!(b.state(), BreakerState::Open, "10 of 10, not of 34");
    }

    #[test]
    fn opens_on_consecutive_failures_then_probes_then_closes() {
        let b = Breaker::new("t", config());
        fail(&b, 2);
        assert_eq!(b.state(), BreakerState::Closed);
        fail(&b, 1);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.try_acquire(), Permit::Rejected);
        std::thread::sleep(Duration::from_millis(40));
        let p1 = b.try_acquire();
        let p2 = b.try_acquire();
        assert_eq!(
            (p1, p2),
            (Permit::Probe { round: 1 }, Permit::Probe { round: 1 })
        );
        assert_eq!(b.try_acquire(), Permit::Rejected, "probes are bounded");
        b.record(p1, Verdict::Success { slow: false });
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.record(p2, Verdict::Success { slow: false });
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.times_opened(), 1);
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_refusals_do_not_count() {
        let b = Breaker::new("t", config());
        for _ in 0..100 {
            let p = b.try_acquire();
            b.record(p, Verdict::Ignored);
        }
        assert_eq!(b.state(), BreakerState::Closed, "refusals say nothing");
        fail(&b, 3);
        std::thread::sleep(Duration::from_millis(40));
        let p = b.try_acquire();
        b.record(p, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.times_opened(), 2);
    }

    #[test]
    fn rates_need_the_minimum_sample() {
        let b = Breaker::new("t", config());
        // Alternate failure and success: never 3 in a row, rate 50%.
        for i in 0..9 {
            let p = b.try_acquire();
            b.record(
                p,
                if i % 2 == 0 {
                    Verdict::Failure
                } else {
                    Verdict::Success { slow: false }
                },
            );
        }
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "9 calls are below the minimum of 10"
        );
        let p = b.try_acquire();
        b.record(p, Verdict::Success { slow: false });
        let p = b.try_acquire();
        b.record(p, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open, "6 of 11 failed");
        let slow = Breaker::new("s", config());
        for _ in 0..10 {
            let p = slow.try_acquire();
            slow.record(p, Verdict::Success { slow: true });
        }
        assert_eq!(slow.state(), BreakerState::Open, "all slow");
    }

    #[test]
    fn dropped_passes_give_their_probe_slots_back() {
        let b = Breaker::new("t", config());
        fail(&b, 3);
        std::thread::sleep(Duration::from_millis(40));
        // Every probe slot taken by calls that are then cancelled (a hedge's loser, a
        // caller's timeout): none reports, and the slots come back.
        for _ in 0..10 {
            let (p1, p2) = (b.pass().unwrap(), b.pass().unwrap());
            assert!(b.pass().is_none(), "probes are bounded");
            assert_eq!(b.probes_out(), 2);
            drop((p1, p2));
            assert_eq!(b.probes_out(), 0);
            assert_eq!(b.state(), BreakerState::HalfOpen);
        }
        for _ in 0..2 {
            b.pass().unwrap().record(Verdict::Success { slow: false });
        }
        assert_eq!(b.state(), BreakerState::Closed, "the probes closed it");
        // A closed breaker's pass dropped counts for nothing.
        for _ in 0..100 {
            drop(b.pass().unwrap());
        }
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.times_opened(), 1);
    }

    #[test]
    fn a_probe_outliving_its_round_counts_for_nothing() {
        let b = Breaker::new("t", config());
        fail(&b, 3);
        std::thread::sleep(Duration::from_millis(40));
        let old = b.try_acquire();
        let failing = b.try_acquire();
        b.record(failing, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open, "a failed probe opens it");
        std::thread::sleep(Duration::from_millis(40));
        let new = b.try_acquire();
        assert_ne!(old, new, "a new round");
        // The old probe's late answers neither free a slot nor close the breaker.
        b.release(old);
        b.record(old, Verdict::Success { slow: false });
        assert_eq!(b.probes_out(), 1);
        let second = b.try_acquire();
        assert!(matches!(second, Permit::Probe { .. }));
        assert_eq!(b.try_acquire(), Permit::Rejected);
        b.record(new, Verdict::Success { slow: false });
        b.record(second, Verdict::Success { slow: false });
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
