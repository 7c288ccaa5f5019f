//! The caller's request path, stage by stage in the order a call meets them. This file
//! is the one list: each step is a function in `stages/` (or a governance primitive),
//! and every step reads the same call in flight ([`Call`]: service state, method policy,
//! body, options, deadline), so the order can be read top to bottom:
//!
//! ```text
//! encode      stages/encode.rs    once per call, before any attempt (typed calls only;
//!                                 raw bytes skip it): every attempt sends the same bytes
//! deadline    here                one budget for the whole call, shared by every attempt
//! breaker     governance          the method's breaker: open fails fast, nothing else runs
//!                                 (a declared method's own; other names share `*`'s)
//! route       stages/route.rs     router plugins narrow the rotation (memoised per shape)
//! select      stages/select.rs    the selector plugin picks, tried endpoints excluded
//! send        stages/send.rs      one attempt on the endpoint's multiplexed connection
//! feedback    stages/feedback.rs  facts, the endpoint's breaker, the selector's outcome
//! retry       stages/retry.rs     failover / retry / hedge, within budget and deadline
//! fallback    stages/fallback.rs  the method's fallback when the call finally fails
//! ```
//!
//! The method policy (governance, breaker, selector, route memo) is a declared method's
//! own or, for any name the manifest does not declare, the service's shared `*` one: all
//! resolved when the client is built or swapped, so a new name costs nothing.
//!
//! The composition is static: no boxed middleware, no allocation to compose. Strategies
//! are plugins called from the stages, not layers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use axle_core::payload;
use axle_governance::breaker::Permit;
use axle_governance::{Fallback, Governance};

use crate::stages::{self, retry::Next};
use crate::state::{self, ServiceState};
use crate::{Call, CallError, CallOptions, Client, Reply};

impl Client {
    /// The whole call: deadline → breaker → attempts (retries, failover, hedging) →
    /// fallback.
    pub(crate) async fn invoke(
        &self,
        service: &str,
        method: &str,
        body: Bytes,
        content_type: &str,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        self.start_monitor();
        let svc = self.state.service(service)?;
        let policy = svc.policy(method);
        let g = &policy.governance;
        let now = Instant::now();
        let deadline = now + options.timeout.unwrap_or(g.timeout());
        let result = match policy.breaker.try_acquire() {
            Permit::Rejected => Err(CallError::BreakerOpen {
                target: format!("{service}/{method}"),
            }),
            permit => {
                svc.budget.deposit();
                let call = Call {
                    svc: &svc,
                    policy: &policy,
                    method,
                    body: &body,
                    content_type,
                    options,
                    deadline,
                };
                let result = self.attempts(&call, g).await;
                let slow = policy.breaker.is_slow(now.elapsed());
                policy
                    .breaker
                    .record(permit, stages::feedback::verdict(&result, slow));
                result
            }
        };
        match (result, &g.fallback) {
            (Err(e), Some(fallback)) if options.fallback && stages::fallback::applies(&e) => {
                tracing::debug!(service, method, "answering with the fallback: {e}");
                self.fallback(&svc, fallback, body, content_type, options)
                    .await
            }
            (result, _) => result,
        }
    }

    /// Attempts until one succeeds, or a failure is final, or retries, budget or deadline
    /// run out. The first attempt is hedged when the method says so.
    async fn attempts(&self, call: &Call<'_>, g: &Governance) -> Result<Reply, CallError> {
        let candidates = stages::route::candidates(call.svc, call.policy, call.options)?;
        let mut tried: Vec<u32> = Vec::new();
        let mut retries_used = 0;
        let hedge =
            (g.idempotent && g.hedge_delay_ms > 0).then(|| Duration::from_millis(g.hedge_delay_ms));
        loop {
            let result = match hedge.filter(|_| tried.is_empty()) {
                Some(delay) => self.hedged(call, &candidates, &mut tried, delay).await,
                None => self.attempt(call, &candidates, &mut tried).await,
            };
            let err = match result {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            match stages::retry::next(&err, g.idempotent) {
                Next::Final => return Err(err),
                Next::Retry if retries_used >= g.retries => return Err(err),
                Next::Retry => {
                    let wait = stages::retry::backoff(
                        Duration::from_millis(g.retry_interval_ms),
                        retries_used,
                    );
                    retries_used += 1;
                    if !stages::retry::fits(wait, call.deadline) || !call.svc.budget.withdraw() {
                        return Err(err);
                    }
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                // Failover never re-runs a handler, and each endpoint is tried at most
                // once per call, so it is bounded without the retry budget (as Finagle's
                // requeues are kept apart from its retries).
                Next::Failover => {
                    if Instant::now() >= call.deadline {
                        return Err(err);
                    }
                }
            }
            if tried.len() >= candidates.members.len() {
                return Err(err);
            }
        }
    }

    /// One attempt: select (excluding `tried`), send, feed the outcome back.
    async fn attempt(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
    ) -> Result<Reply, CallError> {
        let (ep, permit) = self.choose(call, candidates, tried)?;
        self.send_to(call, ep, permit).await
    }

    /// Picks the next endpoint (excluding `tried`, and endpoints whose breaker is open)
    /// and records it as tried.
    fn choose(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
    ) -> Result<(Arc<state::Endpoint>, Permit), CallError> {
        let (ep, permit) = stages::select::pick(
            &self.state,
            call.svc,
            &call.policy.selector,
            candidates,
            tried,
            call.options,
        )?;
        tried.push(ep.id);
        Ok((ep, permit))
    }

    /// Sends to one chosen endpoint and records the outcome.
    async fn send_to(
        &self,
        call: &Call<'_>,
        ep: Arc<state::Endpoint>,
        permit: Permit,
    ) -> Result<Reply, CallError> {
        let now = Instant::now();
        let started = stages::feedback::started(&ep, now);
        let result =
            stages::send::send(&ep, call, call.deadline.saturating_duration_since(now)).await;
        if stages::feedback::finished(&call.policy.selector, &ep, permit, started, &result) {
            // Rare (once per endpoint going down): out of rotation before the next pick.
            self.state.publish();
            self.state
                .event(&ep, crate::health::HealthChange::Unreachable);
        }
        result
    }

    /// The first attempt, with a backup to another endpoint if no answer came within
    /// `delay`: the first success wins and the other is cancelled (dropping its future
    /// sends a `cancel` frame). A backup needs the retry budget.
    async fn hedged(
        &self,
        call: &Call<'_>,
        candidates: &stages::route::Candidates,
        tried: &mut Vec<u32>,
        delay: Duration,
    ) -> Result<Reply, CallError> {
        let (first_ep, first_permit) = self.choose(call, candidates, tried)?;
        let first = self.send_to(call, first_ep, first_permit);
        tokio::pin!(first);
        tokio::select! {
            r = &mut first => return r,
            _ = tokio::time::sleep(delay) => {}
        }
        if !call.svc.budget.withdraw() {
            return first.await;
        }
        let backup = match self.choose(call, candidates, tried) {
            Ok((ep, permit)) => self.send_to(call, ep, permit),
            Err(_) => return first.await,
        };
        tokio::pin!(backup);
        tokio::select! {
            r = &mut first => match r {
                Ok(reply) => Ok(reply),
                Err(_) => backup.await,
            },
            r = &mut backup => match r {
                Ok(reply) => Ok(reply),
                Err(_) => first.await,
            },
        }
    }

    /// Answers with the method's fallback.
    async fn fallback(
        &self,
        svc: &Arc<ServiceState>,
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
                Box::pin(self.invoke(service, method, body, content_type, &options)).await?
            }
        };
        reply.fallback = true;
        Ok(reply)
    }
}
