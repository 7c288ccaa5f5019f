//! The caller's request path, stage by stage in the order a call meets them. This file
//! is the one list: each step is a function in `stages/` (or a governance primitive),
//! and every step reads the same call in flight ([`Call`]: service state, method policy,
//! body, options, deadline), so the order can be read top to bottom:
//!
//! ```text
//! encode      stages/encode.rs    once per call, before any attempt (typed calls only;
//!                                 raw bytes skip it): every attempt sends the same bytes
//! intercept   stages/intercept.rs client-before: the service's `client-interceptors` in
//!                                 order pass, set the tags the call routes with and sends,
//!                                 or refuse (nothing sent); none configured: no cost
//! cache       stages/cache.rs     an idempotent method's answer kept `cache-ttl-ms`:
//!                                 the same request (method, content type, bytes) is
//!                                 answered from it, nothing below runs (opt-in)
//! deadline    here                one budget for the whole call, shared by every attempt;
//!                                 it runs from before encoding, so plugin and connect time
//!                                 count against it
//! breaker     governance          the method's breaker: open fails fast, nothing else runs
//!                                 (a declared method's own; other names share `*`'s)
//! route       stages/route.rs     router plugins narrow the rotation (memoised per shape)
//! select      stages/select.rs    the selector plugin picks, tried endpoints excluded
//! send        stages/send.rs      one attempt on the endpoint's multiplexed connection
//! feedback    stages/feedback.rs  facts, the endpoint's breaker, the selector's outcome
//! retry       stages/retry.rs     failover / retry / hedge, within budget and deadline;
//!                                 failovers capped per call (`max-failovers`); a lost
//!                                 answer of a deduplicated method goes back to its
//!                                 endpoint (the same request id, answered from memory)
//! intercept   stages/intercept.rs client-after: the final answer shown to the chain; a
//!                                 refusal replaces it
//! fallback    stages/fallback.rs  the method's fallback when the call finally fails
//! ```
//!
//! The method policy (governance, breaker, selector, route memo) is a declared method's
//! own or, for any name the manifest does not declare, the service's shared `*` one: all
//! resolved when the client is built or swapped, so a new name costs nothing.
//!
//! The composition is static: no boxed middleware, no allocation to compose. Strategies
//! are plugins called from the stages, not layers.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::Instrument;

use axle_core::payload;
use axle_governance::{Fallback, Governance};
use axle_plugin_host::kinds::serializer::Value;
use axle_transport::TransportError;

use crate::stages::{self, feedback::Attempt, feedback::Finding, retry::Next};
use crate::state::ServiceState;
use crate::{Call, CallError, CallOptions, Client, Reply};

impl Client {
    /// The whole call: deadline → breaker → attempts (retries, failover, hedging) →
    /// fallback. The budget runs from `started` (before the request was encoded), so
    /// plugin time counts against it like network time.
    ///
    /// Whatever the call holds is given back however it ends, its future dropped
    /// included: the method's breaker permit (a [`Pass`](axle_governance::breaker::Pass)),
    /// each attempt's endpoint permit and in-flight count ([`Attempt`]).
    // `value` rides beside `body` (the same request, before encoding) for routers that
    // read fields; bundling the two would only rename the count.
    //
    // The request path's futures (this one, `attempts`, `send_to`, `stages::send`) are
    // plain functions returning an `async move` block, not `async fn`s: an `async fn`'s
    // state keeps its arguments twice (as given and as the body's locals), the block's
    // once, and a call's future is moved by copying (docs/performance.md, "The size of a
    // call's future").
    #[allow(clippy::too_many_arguments, clippy::manual_async_fn)]
    pub(crate) fn invoke<'a>(
        &'a self,
        service: &'a str,
        method: &'a str,
        body: Bytes,
        value: Option<&'a Value>,
        content_type: &'a str,
        options: &'a CallOptions,
        started: Instant,
    ) -> impl Future<Output = Result<Reply, CallError>> + Send + 'a {
        async move {
            self.start_monitor();
            let svc = self.state.service(service)?;
            // Policy and rotation in one load; the call borrows from it to its end.
            let current = svc.current();
            let policy = current.policies.of(method);
            let g = &policy.governance;
            let retagged;
            let options = {
                let seen = stages::intercept::Seen {
                    svc,
                    method,
                    body: &body,
                    options,
                };
                let budget_end = started + options.timeout.unwrap_or(g.timeout());
                match stages::intercept::before(
                    &policy.slots.client_interceptors,
                    &seen,
                    budget_end,
                ) {
                    Ok(None) => options,
                    // Boxed: only a call whose interceptors set tags needs it, and it would
                    // sit in every call's future.
                    Ok(Some(tags)) => {
                        retagged = Box::new(CallOptions {
                            tags,
                            ..options.clone()
                        });
                        &*retagged
                    }
                    Err(refused) => {
                        let refused = Err(refused);
                        let took = started.elapsed().as_nanos() as u64;
                        policy.counters.ended(&refused, took);
                        return refused;
                    }
                }
            };
            if let Some(cache) = &policy.cache {
                let hit = cache.get(method, content_type, &body);
                policy.counters.cache(hit.is_some());
                if let Some(reply) = hit {
                    return Ok(reply);
                }
            }
            let deadline = started + options.timeout.unwrap_or(g.timeout());
            let trace = crate::trace::for_call(options.trace);
            let span = crate::trace::call_span(service, method, &trace, options.trace.as_ref());
            // With how long the attempts took (one clock reading for the breaker and the
            // counters).
            let (result, took) = match policy.breaker.pass() {
                None => (
                    Err(CallError::BreakerOpen {
                        target: format!("{service}/{method}"),
                    }),
                    None,
                ),
                Some(pass) => {
                    svc.budget.deposit();
                    let call = Call {
                        svc,
                        policy,
                        current: &current,
                        method,
                        body: &body,
                        value,
                        content_type,
                        options,
                        deadline,
                        request_id: options
                            .request_id
                            .unwrap_or_else(|| fastrand::u128(..).to_be_bytes()),
                        trace,
                        attempts: Default::default(),
                    };
                    let (result, ended) = self.attempts(&call, g).instrument(span.clone()).await;
                    // The last attempt's own reading when an answer ended the call (read as
                    // it came, for the endpoint's facts).
                    let took = match ended {
                        Some(at) => at.saturating_duration_since(started),
                        None => started.elapsed(),
                    };
                    let slow = policy.breaker.is_slow(took);
                    pass.record(stages::feedback::verdict(&result, slow));
                    (result, Some(took))
                }
            };
            let seen = stages::intercept::Seen {
                svc,
                method,
                body: &body,
                options,
            };
            let result = stages::intercept::after(
                &policy.slots.client_interceptors,
                &seen,
                deadline,
                result,
            );
            crate::trace::ended(&span, &result);
            // Read again only when client-after interceptors ran since.
            let took = match took {
                Some(took) if policy.slots.client_interceptors.is_empty() => took,
                _ => started.elapsed(),
            };
            policy.counters.ended(&result, took.as_nanos() as u64);
            if let (Some(cache), Ok(reply)) = (&policy.cache, &result) {
                cache.put(method, content_type, &body, reply);
            }
            match (result, &g.fallback) {
                (Err(e), Some(fallback)) if options.fallback && stages::fallback::applies(&e) => {
                    tracing::debug!(service, method, "answering with the fallback: {e}");
                    policy.counters.fell_back();
                    self.fallback(svc, fallback, body, content_type, options)
                        .await
                }
                (result, _) => result,
            }
        }
    }

    /// Attempts until one succeeds, or a failure is final, or retries, failovers, budget
    /// or deadline run out. The first attempt is hedged when the method says so. With the
    /// result, when it came, if an attempt's answer (or failure) ended the call.
    #[allow(clippy::manual_async_fn)] // a block on purpose: see `invoke`
    fn attempts<'a, 'b>(
        &'a self,
        call: &'a Call<'b>,
        g: &'a Governance,
    ) -> impl Future<Output = (Result<Reply, CallError>, Option<Instant>)> + use<'a, 'b> {
        async move {
            let candidates = match stages::route::candidates(&self.state, call) {
                Ok(candidates) => candidates,
                Err(e) => return (Err(e), None),
            };
            let mut tried = stages::select::Tried::new();
            let (mut retries_used, mut failovers) = (0, 0);
            let hedge = (g.idempotent && g.hedge_delay_ms > 0)
                .then(|| Duration::from_millis(g.hedge_delay_ms));
            let rerun = stages::retry::Rerun::of(g);
            // The endpoint to go back to (`Next::Again`).
            let mut again: Option<Attempt> = None;
            loop {
                let (result, ended) = match (again.take(), hedge.filter(|_| tried.is_empty())) {
                    (Some(attempt), _) => {
                        let (result, ended) = self.send_to(call, attempt, Instant::now()).await;
                        (result, Some(ended))
                    }
                    // Boxed: a hedge holds two attempts at once, and unboxed it would double
                    // the size of every call's future, which is moved by copying.
                    (None, Some(delay)) => {
                        Box::pin(self.hedged(call, &candidates, &mut tried, delay)).await
                    }
                    (None, None) => match self.choose(call, &candidates, &mut tried) {
                        Ok((attempt, now)) => {
                            let (result, ended) = self.send_to(call, attempt, now).await;
                            (result, Some(ended))
                        }
                        Err(e) => (Err(e), None),
                    },
                };
                let err = match result {
                    Ok(reply) => return (Ok(reply), ended),
                    Err(e) => e,
                };
                let next = stages::retry::next(&err, rerun);
                let wait = match next {
                    Next::Final => return (Err(err), ended),
                    Next::Retry | Next::Again if retries_used >= g.retries => {
                        return (Err(err), ended)
                    }
                    Next::Again => {
                        // Only there: elsewhere the request could run a second time.
                        let last = tried.last().copied();
                        match last.and_then(|id| stages::select::again(&candidates, id)) {
                            Some(attempt) => again = Some(attempt),
                            None => return (Err(err), ended),
                        }
                        let wait = stages::retry::backoff(
                            Duration::from_millis(g.retry_interval_ms),
                            retries_used,
                        );
                        retries_used += 1;
                        wait
                    }
                    Next::Retry => {
                        let wait = stages::retry::backoff(
                            Duration::from_millis(g.retry_interval_ms),
                            retries_used,
                        );
                        retries_used += 1;
                        wait
                    }
                    // Failover never re-runs a handler, and each endpoint is tried at most
                    // once per call; it is also capped per call, and one after a provider's
                    // refusal needs the budget (Finagle keeps requeues apart from retries;
                    // under cluster-wide overload they must not multiply the load either).
                    Next::Failover if failovers >= g.max_failovers => return (Err(err), ended),
                    Next::Failover => {
                        failovers += 1;
                        Duration::ZERO
                    }
                };
                let nowhere_new = again.is_none() && tried.len() >= candidates.members().len();
                if !stages::retry::fits(wait, call.deadline) || nowhere_new {
                    return (Err(err), ended);
                }
                let counters = &call.policy.counters;
                if stages::retry::costs_budget(&err, next) && !call.svc.budget.withdraw() {
                    counters.budget_refused();
                    return (Err(err), ended);
                }
                match next {
                    Next::Retry | Next::Again => counters.retried(),
                    _ => counters.failed_over(),
                }
                tracing::debug!(
                    service = %call.svc.name,
                    method = call.method,
                    attempt = call.attempts.load(std::sync::atomic::Ordering::Relaxed) + 1,
                    reason = %err,
                    "{}",
                    if next == Next::Failover { "failing over" } else { "retrying" },
                );
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Picks the next endpoint (excluding `tried`, and endpoints whose breaker is open)
    /// and records it as tried; with the clock read after the pick, which `send_to`
    /// checks the deadline against and sends at (one reading for both).
    fn choose<'c>(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates<'c>,
        tried: &mut stages::select::Tried,
    ) -> Result<(Attempt<'c>, Instant), CallError> {
        let attempt = stages::select::pick(
            &self.state,
            call.svc,
            &call.policy.selector,
            candidates,
            tried,
            call.options,
        )?;
        tried.push(attempt.ep.id);
        Ok((attempt, Instant::now()))
    }

    /// Sends to one chosen endpoint at `now` (a reading taken after the pick) and
    /// records the outcome; with the reading taken when the outcome came. Nothing is
    /// sent once the budget is gone (plugins, the pick and earlier attempts took it).
    /// Dropped before its outcome (a hedge's loser, a caller that stopped waiting), the
    /// attempt gives back what it held.
    #[allow(clippy::manual_async_fn)] // a block on purpose: see `invoke`
    fn send_to<'a, 'b>(
        &'a self,
        call: &'a Call<'b>,
        mut attempt: Attempt<'b>,
        now: Instant,
    ) -> impl Future<Output = (Result<Reply, CallError>, Instant)> + use<'a, 'b> {
        async move {
            if now >= call.deadline {
                // What was left went before the send: nothing is sent, nothing is learnt.
                return (Err(CallError::Transport(TransportError::Timeout)), now);
            }
            attempt.sent(now);
            // Borrowed, not cloned: the call's rotation holds the endpoint to the end, and
            // a clone is a write to a count that every core's calls write.
            let ep = attempt.ep;
            let number = call
                .attempts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            let span_id = crate::trace::span_id();
            let span = crate::trace::attempt_span(call, ep, number, &span_id);
            let result = stages::send::send(ep, call, call.deadline - now, span_id)
                .instrument(span.clone())
                .await;
            crate::trace::ended(&span, &result);
            let ended = Instant::now();
            let finding = attempt.finish(&call.policy.selector, &result, ended);
            match finding {
                Finding::Nothing => {}
                // Rare (once per endpoint going down): out of rotation before the next pick,
                // and re-dialled until it answers again.
                Finding::Unreachable => {
                    self.state.publish();
                    self.state
                        .event(ep, crate::health::HealthChange::Unreachable);
                    crate::health::redial::start(&self.state, ep);
                }
                // Stopping (or shedding this connection): a fresh connection tells which.
                Finding::GoingAway => crate::health::redial::start(&self.state, ep),
            }
            (result, ended)
        }
    }

    /// The first attempt, with a backup to another endpoint if no answer came within
    /// `delay`: the first success wins and the other is dropped (its connection sends a
    /// `cancel` frame; its attempt gives back its permit and in-flight count). A backup
    /// needs the retry budget.
    async fn hedged<'b>(
        &self,
        call: &Call<'b>,
        candidates: &stages::route::Candidates<'b>,
        tried: &mut stages::select::Tried,
        delay: Duration,
    ) -> (Result<Reply, CallError>, Option<Instant>) {
        let (first, now) = match self.choose(call, candidates, tried) {
            Ok(chosen) => chosen,
            Err(e) => return (Err(e), None),
        };
        let first = self.send_to(call, first, now);
        tokio::pin!(first);
        tokio::select! {
            (r, at) = &mut first => return (r, Some(at)),
            _ = tokio::time::sleep(delay) => {}
        }
        if !call.svc.budget.withdraw() {
            call.policy.counters.budget_refused();
            let (r, at) = first.await;
            return (r, Some(at));
        }
        let backup = match self.choose(call, candidates, tried) {
            Ok((attempt, now)) => self.send_to(call, attempt, now),
            Err(_) => {
                let (r, at) = first.await;
                return (r, Some(at));
            }
        };
        call.policy.counters.hedged();
        tracing::debug!(
            service = %call.svc.name,
            method = call.method,
            attempt = call.attempts.load(std::sync::atomic::Ordering::Relaxed) + 1,
            reason = "no answer within hedge-delay-ms",
            "hedging",
        );
        tokio::pin!(backup);
        let (r, at) = tokio::select! {
            (r, at) = &mut first => match r {
                Ok(reply) => (Ok(reply), at),
                Err(_) => backup.await,
            },
            (r, at) = &mut backup => match r {
                Ok(reply) => (Ok(reply), at),
                Err(_) => first.await,
            },
        };
        (r, Some(at))
    }

    /// Answers with the method's fallback.
    async fn fallback(
        &self,
        svc: &ServiceState,
        fallback: &Fallback,
        body: Bytes,
        content_type: &str,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        let mut reply = match fallback {
            Fallback::Value(v) => {
                let json = serde_json::to_value(v).map_err(|e| CallError::Encode(e.to_string()))?;
                let value = payload::to_value(&json).map_err(CallError::Encode)?;
                let (payload, content_type) = stages::encode::encode(svc, &value)?;
                Reply {
                    payload,
                    content_type,
                    endpoint: None,
                    fallback: false,
                }
            }
            Fallback::Call(target) => {
                let (service, method) = target.split_once('/').unwrap_or((target, ""));
                // The fallback's own failure is final: no fallback of a fallback.
                let options = CallOptions {
                    fallback: false,
                    ..options.clone()
                };
                let now = Instant::now();
                Box::pin(self.invoke(service, method, body, None, content_type, &options, now))
                    .await?
            }
        };
        reply.fallback = true;
        Ok(reply)
    }
}
