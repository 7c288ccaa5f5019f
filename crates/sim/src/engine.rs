//! The event loop: a binary heap of timed events on one thread, the kernel clock set to
//! each event's virtual time before it is handled, so everything the kernel and the
//! plugins read (`now_ns`, facts windows, breakers, budgets, health records,
//! `host.now-ns`) is simulated time. A call goes through `caller.rs` the way the client's
//! pipeline goes: method breaker and budget deposit, route, select, send, feedback, and
//! retry or failover within the deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use axle_client::decide::Next;
use axle_client::{CallError, Reply};
use axle_core::clock::VirtualClock;
use axle_governance::breaker::Permit;
use axle_transport::TransportError;
use axle_wire::ErrorClass;

use crate::arrivals::{ArrivalProcess, Mix};
use crate::caller::{Candidates, Kernel};
use crate::provider::{Arrive, Provider};
use crate::report::Recorder;
use crate::rng::Rng;
use crate::scenario::Scenario;

/// What happens at an instant. Ties at one instant run in the order they were scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    /// A request of caller `caller` (a closed-loop caller's next, or the next open one).
    Arrival {
        caller: u32,
    },
    /// A provider finished attempt `att` (if it still has epoch `epoch`), with an
    /// `internal` error or not.
    Done {
        att: u32,
        epoch: u32,
        error: bool,
    },
    /// Call `call` (serial `serial`) reaches its deadline.
    Deadline {
        call: u32,
        serial: u32,
    },
    /// Call `call` goes on after its retry backoff.
    Resume {
        call: u32,
        serial: u32,
    },
    Score,
    Heartbeat,
    /// Fault timeline entry `i`.
    Fault(u32),
    /// The callers' connections to killed provider `p` noticed it closed.
    Closed {
        p: u32,
    },
    /// Discovery's list update for provider `p`: listed or not.
    Listing {
        p: u32,
        listed: bool,
    },
}

struct Call {
    serial: u32,
    /// The caller process (kernel) making it.
    caller: usize,
    kind: usize,
    hash_key: u64,
    start: u64,
    deadline: u64,
    permit: Permit,
    candidates: Candidates,
    tried: Vec<u32>,
    retries: u32,
    failovers: u32,
    /// The attempt in flight.
    att: Option<u32>,
    /// The endpoint to go back to (`Next::Again`) with its breaker permit.
    again: Option<(u32, Permit)>,
    /// The last failure, the call's error if nothing better comes.
    last: Option<CallError>,
    active: bool,
}

pub(crate) struct Att {
    call: u32,
    pub(crate) endpoint: u32,
    permit: Permit,
    sent: u64,
    live: bool,
    pub(crate) held: Option<crate::limit::Held>,
}

/// What a run produced, besides the report.
pub struct RunCounts {
    pub events: u64,
    pub requests: u64,
}

/// A simulation in progress.
pub struct Engine<'s> {
    pub(crate) s: &'s Scenario,
    clock: VirtualClock,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    pub(crate) now: u64,
    end: u64,
    /// One kernel per caller process (`callers`): each its own facts, health, breakers,
    /// budget and plugin instances.
    pub kernels: Vec<Kernel>,
    pub providers: Vec<Provider>,
    arrivals: ArrivalProcess,
    mix: Mix,
    latency_rng: Rng,
    timeline: Vec<(u64, crate::faults::Action)>,
    calls: Vec<Call>,
    free_calls: Vec<u32>,
    pub(crate) atts: Vec<Att>,
    serial: u32,
    /// One limiter per provider, when the manifest fills the server's limiter slot.
    pub(crate) limits: Option<crate::limit::Limits>,
    pub(crate) discovery_held: bool,
    /// Listing changes discovery could not deliver during an outage.
    pub(crate) held: Vec<(u32, bool)>,
    pub rec: Recorder,
    pub counts: RunCounts,
}

pub(crate) fn ns(secs: f64) -> u64 {
    (secs * 1e9) as u64
}

impl<'s> Engine<'s> {
    /// Builds the world at virtual time 0: the clock is installed first, so every
    /// kernel-clock reading from here on (facts cells, breakers) is simulated.
    pub fn new(s: &'s Scenario, manifest: axle_manifest::Manifest) -> anyhow::Result<Self> {
        let clock = VirtualClock::install(0);
        fastrand::seed(s.seed);
        let mut providers = Vec::with_capacity(s.provider_count());
        for (g, spec) in s.providers.iter().enumerate() {
            for i in 0..spec.count {
                providers.push(Provider::new(g, spec, i));
            }
        }
        let kernels = (0..s.callers)
            .map(|_| Kernel::new(manifest.clone(), &s.service, &s.requests, &providers))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let limits = crate::limit::Limits::load(&kernels[0].host, &manifest, providers.len())?;
        let rec = Recorder::new(s, &providers);
        Ok(Engine {
            s,
            clock,
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            end: ns(s.duration_s),
            kernels,
            providers,
            arrivals: ArrivalProcess::new(&s.arrivals, Rng::stream(s.seed, 1)),
            mix: Mix::new(&s.requests, Rng::stream(s.seed, 2)),
            latency_rng: Rng::stream(s.seed, 3),
            timeline: crate::faults::timeline(s),
            calls: Vec::new(),
            free_calls: Vec::new(),
            atts: Vec::new(),
            serial: 0,
            limits,
            discovery_held: false,
            held: Vec::new(),
            rec,
            counts: RunCounts {
                events: 0,
                requests: 0,
            },
        })
    }

    pub(crate) fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Runs to the scenario's end.
    pub fn run(&mut self) {
        for k in &mut self.kernels {
            k.publish(&self.providers);
        }
        let callers = self.kernels.len() as u64;
        match self.arrivals.closed() {
            // Each worker starts a nanosecond after the previous one (a fixed order), the
            // workers spread over the caller processes in turn.
            Some((workers, _)) => (0..u64::from(workers)).for_each(|i| {
                let caller = (i % callers) as u32;
                self.at(i, Ev::Arrival { caller })
            }),
            None => self.at(0, Ev::Arrival { caller: 0 }),
        }
        let score = self.kernels[0].settings.score_interval.as_nanos() as u64;
        let beat = self.kernels[0].settings.heartbeat_interval.as_nanos() as u64;
        self.at(score, Ev::Score);
        self.at(beat, Ev::Heartbeat);
        for i in 0..self.timeline.len() {
            let t = self.timeline[i].0;
            self.at(t, Ev::Fault(i as u32));
        }
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            if t > self.end {
                break;
            }
            self.now = t;
            self.clock.set(t);
            self.counts.events += 1;
            match ev {
                Ev::Arrival { caller } => self.arrival(caller as usize),
                Ev::Done { att, epoch, error } => self.done(att, epoch, error),
                Ev::Deadline { call, serial } => {
                    if self.is(call, serial) {
                        let att = self.calls[call as usize].att;
                        match att {
                            Some(att) => {
                                self.result(att, Err(CallError::Transport(TransportError::Timeout)))
                            }
                            None => self
                                .end_call(call, Err(CallError::Transport(TransportError::Timeout))),
                        }
                    }
                }
                Ev::Resume { call, serial } => {
                    if self.is(call, serial) {
                        self.attempt(call);
                    }
                }
                Ev::Score => {
                    for k in &mut self.kernels {
                        let changes = crate::health::score(k, &self.providers, t / 1_000_000);
                        self.rec.health(t, &changes, &self.providers);
                    }
                    self.at(t + score, Ev::Score);
                }
                Ev::Heartbeat => {
                    for k in &mut self.kernels {
                        let changes = crate::health::heartbeats(k, &self.providers, t);
                        self.rec.health(t, &changes, &self.providers);
                    }
                    self.at(t + beat, Ev::Heartbeat);
                }
                Ev::Fault(i) => self.apply(self.timeline[i as usize].1),
                Ev::Listing { p, listed } => self.listing(p, listed),
                Ev::Closed { p } => self.closed(p as usize),
            }
        }
        self.rec.tables = self.kernels.iter().map(|k| k.tables).sum();
        self.rec.finish(&self.kernels[0], &self.providers);
    }

    fn is(&self, call: u32, serial: u32) -> bool {
        let c = &self.calls[call as usize];
        c.active && c.serial == serial
    }

    fn arrival(&mut self, caller: usize) {
        if !self.arrivals.admit() {
            return;
        }
        if self.arrivals.closed().is_none() {
            let next = self.arrivals.next(self.now);
            let turn = ((caller + 1) % self.kernels.len()) as u32;
            self.at(next, Ev::Arrival { caller: turn });
        }
        self.counts.requests += 1;
        let (kind, hash_key) = self.mix.draw(&self.s.requests);
        self.rec.request(self.now);
        let policy = &self.kernels[caller].policies[kind];
        let permit = policy.breaker.try_acquire();
        if permit == Permit::Rejected {
            self.rec.breaker_rejected += 1;
            let err = CallError::BreakerOpen {
                target: format!("{}/{}", self.s.service, self.s.requests[kind].method),
            };
            self.rec.call_ended(self.now, 0, &Err(err));
            return self.caller_free(caller);
        }
        let timeout = policy.governance.timeout().as_nanos() as u64;
        let k = &mut self.kernels[caller];
        k.budget.deposit();
        let Some(candidates) = k.candidates(kind) else {
            let err = no_endpoint(&self.s.service);
            k.policies[kind].breaker.record(
                permit,
                axle_client::decide::verdict(&Err(err.clone()), false),
            );
            self.rec.call_ended(self.now, 0, &Err(err));
            return self.caller_free(caller);
        };
        self.serial = self.serial.wrapping_add(1);
        let call = Call {
            serial: self.serial,
            caller,
            kind,
            hash_key,
            start: self.now,
            deadline: self.now + timeout,
            permit,
            candidates,
            tried: Vec::new(),
            retries: 0,
            failovers: 0,
            att: None,
            again: None,
            last: None,
            active: true,
        };
        let id = match self.free_calls.pop() {
            Some(id) => {
                self.calls[id as usize] = call;
                id
            }
            None => {
                self.calls.push(call);
                (self.calls.len() - 1) as u32
            }
        };
        let deadline = self.calls[id as usize].deadline;
        self.at(
            deadline,
            Ev::Deadline {
                call: id,
                serial: self.serial,
            },
        );
        self.attempt(id);
    }

    /// Picks and sends the call's next attempt.
    fn attempt(&mut self, call: u32) {
        let c = &mut self.calls[call as usize];
        if self.now >= c.deadline {
            return self.end_call(call, Err(CallError::Transport(TransportError::Timeout)));
        }
        let (kind, key, caller) = (c.kind, c.hash_key, c.caller);
        let candidates = c.candidates.clone();
        let mut tried = std::mem::take(&mut c.tried);
        let picked = match c.again.take() {
            Some(again) => Some(again),
            None => self.kernels[caller].pick(kind, &candidates, &mut tried, key),
        };
        let c = &mut self.calls[call as usize];
        c.tried = tried;
        let Some((endpoint, permit)) = picked else {
            return self.end_call(call, Err(no_endpoint(&self.s.service)));
        };
        if !c.tried.contains(&endpoint) {
            c.tried.push(endpoint);
        }
        let att = Att {
            call,
            endpoint,
            permit,
            sent: self.now,
            live: true,
            held: None,
        };
        // Attempt ids are never reused: a provider's queue and a pending `Done` may still
        // name an attempt its caller gave up on.
        self.atts.push(att);
        let id = (self.atts.len() - 1) as u32;
        c.att = Some(id);
        self.kernels[caller].endpoints[endpoint as usize]
            .cell
            .started();
        let p = Kernel::provider_of(endpoint);
        self.rec.sent(self.now, p);
        if self.providers[p].answers() && self.limit(id, p, caller, kind) {
            return;
        }
        let provider = &mut self.providers[p];
        match provider.arrive(id, self.now, &mut self.latency_rng) {
            Arrive::Refused => {
                let addr = provider.address.clone();
                let reason = "connection refused".into();
                self.result(
                    id,
                    Err(CallError::Transport(TransportError::Connect {
                        addr,
                        reason,
                    })),
                );
            }
            Arrive::Reset => {
                let addr = provider.address.clone();
                let reason = "write failed: connection reset by peer".into();
                self.result(
                    id,
                    Err(CallError::Transport(TransportError::Reset { addr, reason })),
                );
            }
            Arrive::Hang | Arrive::Queued => {}
            Arrive::Start { done_ns, error } => {
                let epoch = provider.epoch;
                self.at(
                    done_ns,
                    Ev::Done {
                        att: id,
                        epoch,
                        error,
                    },
                );
            }
        }
    }

    fn done(&mut self, att: u32, epoch: u32, error: bool) {
        let p = Kernel::provider_of(self.atts[att as usize].endpoint);
        if self.providers[p].epoch != epoch {
            return; // killed since: its attempts already failed
        }
        self.release(att, error);
        let atts = &self.atts;
        let next = self.providers[p].finish(att, self.now, &mut self.latency_rng, |a| {
            atts[a as usize].live
        });
        if let Some((next, Arrive::Start { done_ns, error })) = next {
            self.at(
                done_ns,
                Ev::Done {
                    att: next,
                    epoch,
                    error,
                },
            );
        }
        if !self.atts[att as usize].live {
            return;
        }
        let result = if error {
            Err(CallError::Remote {
                class: ErrorClass::Internal,
                message: "simulated internal error".into(),
                retry_after_ms: None,
                code: None,
            })
        } else {
            let endpoint = Some(self.atts[att as usize].endpoint);
            Ok(Reply {
                payload: bytes::Bytes::new(),
                content_type: axle_wire::ContentType::RAW,
                endpoint,
                fallback: false,
            })
        };
        self.result(att, result);
    }

    /// An attempt's result reaches its caller: feedback, then the retry decision.
    pub(crate) fn result(&mut self, att: u32, result: Result<Reply, CallError>) {
        self.release(att, true); // not served: failed, killed, or given up on
        let a = &mut self.atts[att as usize];
        if !a.live {
            return;
        }
        a.live = false;
        let (call, endpoint, permit, latency) = (a.call, a.endpoint, a.permit, self.now - a.sent);
        let (kind, caller) = (
            self.calls[call as usize].kind,
            self.calls[call as usize].caller,
        );
        self.calls[call as usize].att = None;
        if self.kernels[caller].finish(kind, endpoint, permit, latency, &result) {
            // A refused connect, news: out of rotation before the next pick.
            self.kernels[caller].publish(&self.providers);
            self.rec.health(
                self.now,
                &[(endpoint, axle_client::health::HealthChange::Unreachable)],
                &self.providers,
            );
        }
        let err = match result {
            Ok(reply) => return self.end_call(call, Ok(reply)),
            Err(e) => e,
        };
        self.after_failure(call, err, endpoint);
    }

    /// The pipeline's retry loop, one turn (`pipeline.rs` `attempts`).
    fn after_failure(&mut self, call: u32, err: CallError, endpoint: u32) {
        let c = &self.calls[call as usize];
        let k = &self.kernels[c.caller];
        let g = &k.policies[c.kind].governance;
        let next = k.next(c.kind, &err);
        let (retries_max, failovers_max, interval) =
            (g.retries, g.max_failovers, g.retry_interval_ms);
        let c = &mut self.calls[call as usize];
        let wait = match next {
            Next::Final => return self.end_call(call, Err(err)),
            Next::Retry | Next::Again if c.retries >= retries_max => {
                return self.end_call(call, Err(err))
            }
            Next::Retry | Next::Again => {
                if next == Next::Again {
                    // Only the same endpoint may answer it (`stages::select::again`): if
                    // it is still a candidate and its breaker lets a request through.
                    let breaker = &self.kernels[c.caller].endpoints[endpoint as usize].breaker;
                    let permit = match c.candidates.members.contains(&endpoint) {
                        true => breaker.try_acquire(),
                        false => Permit::Rejected,
                    };
                    if permit == Permit::Rejected {
                        return self.end_call(call, Err(err));
                    }
                    c.again = Some((endpoint, permit));
                }
                let wait = axle_client::decide::backoff(
                    std::time::Duration::from_millis(interval),
                    c.retries,
                );
                c.retries += 1;
                wait.as_nanos() as u64
            }
            Next::Failover if c.failovers >= failovers_max => return self.end_call(call, Err(err)),
            Next::Failover => {
                c.failovers += 1;
                0
            }
        };
        let nowhere_new = next != Next::Again && c.tried.len() >= c.candidates.members.len();
        if self.now + wait >= c.deadline || nowhere_new {
            return self.end_call(call, Err(err));
        }
        if Kernel::costs_budget(&err, next) && !self.kernels[c.caller].budget.withdraw() {
            self.rec.budget_refused += 1;
            return self.end_call(call, Err(err));
        }
        match next {
            Next::Failover => self.rec.failovers += 1,
            _ => self.rec.retries += 1,
        }
        c.last = Some(err);
        if wait == 0 {
            self.attempt(call);
        } else {
            let serial = c.serial;
            self.at(self.now + wait, Ev::Resume { call, serial });
        }
    }

    fn end_call(&mut self, call: u32, result: Result<Reply, CallError>) {
        if let Some(att) = self.calls[call as usize].att {
            self.release(att, true); // given up on: the provider hears the cancel
        }
        let c = &mut self.calls[call as usize];
        if !c.active {
            return;
        }
        c.active = false;
        // A pick that found nothing after a failure ends with that failure.
        let result = match (result, c.last.take()) {
            (Err(CallError::NoEndpoint { .. }), Some(last)) => Err(last),
            (r, _) => r,
        };
        if let Some((id, permit)) = c.again.take() {
            self.kernels[c.caller].endpoints[id as usize]
                .breaker
                .release(permit);
        }
        if let Some(att) = c.att.take() {
            self.atts[att as usize].live = false;
            let ep = &self.kernels[c.caller].endpoints[self.atts[att as usize].endpoint as usize];
            ep.cell.abandoned();
            ep.breaker.release(self.atts[att as usize].permit);
        }
        let took = self.now - c.start;
        let caller = c.caller;
        let policy = &self.kernels[caller].policies[c.kind];
        let slow = policy
            .breaker
            .is_slow(std::time::Duration::from_nanos(took));
        policy
            .breaker
            .record(c.permit, axle_client::decide::verdict(&result, slow));
        self.rec.call_ended(self.now, took, &result);
        self.free_calls.push(call);
        self.caller_free(caller);
    }

    /// A call of `caller` ended: a closed-loop worker calls again after its pause.
    fn caller_free(&mut self, caller: usize) {
        if let Some((_, think)) = self.arrivals.closed() {
            let caller = caller as u32;
            self.at(self.now + think, Ev::Arrival { caller });
        }
    }
}

fn no_endpoint(service: &str) -> CallError {
    CallError::NoEndpoint {
        service: service.to_string(),
        reason: "no endpoint left to try".into(),
    }
}
