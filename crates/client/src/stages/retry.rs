//! Which failures may be sent again, and when.
//!
//! - Refusals that prove the handler did not run (`overloaded`, `shutting_down`) and
//!   connections that never carried the request (refused, draining) **fail over**: another
//!   endpoint is tried, without using up `retries` (the seeds' overflow failover), at most
//!   `max-failovers` times per call.
//! - Timeouts, resets and `internal` errors after the request was sent are **retried only
//!   for idempotent methods**: the handler may have run.
//! - A method whose providers **deduplicate** it (`dedup-ttl-ms`) may be sent again when
//!   its answer was lost (a reset): to the **same endpoint**, whose table answers with the
//!   first run's result (or waits for it) rather than running it twice. Elsewhere it could
//!   run again, so when that endpoint cannot be tried the failure is final.
//! - A `business` error whose code the method lists in `retry-on-business` is retried on
//!   another endpoint, for idempotent or deduplicated methods only.
//! - Everything else (`business`, `rate_limited`, `not_found`, `bad_request`, `forbidden`,
//!   a frame over the size limit) is final.
//!
//! A retry also needs the service's retry budget, and so does a failover after a
//! provider's refusal (it cost that provider a request): when every provider is
//! overloaded, failovers stay a share of the requests rather than multiplying them by the
//! number of endpoints. A failover from a request that was never sent costs no provider
//! anything and needs no budget. None starts after the deadline.

use std::time::{Duration, Instant};

use crate::CallError;
use axle_governance::{Codes, Governance};
use axle_transport::TransportError;
use axle_wire::ErrorClass;

/// What may follow a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Give up.
    Final,
    /// Another endpoint, not counted against `retries`.
    Failover,
    /// Another endpoint, counted against `retries`.
    Retry,
    /// The same endpoint again (its deduplication table has the answer), counted against
    /// `retries`.
    Again,
}

/// What a method's governance allows beyond failover.
#[derive(Clone, Copy)]
pub struct Rerun<'a> {
    /// Safe to run twice (`idempotent`).
    pub idempotent: bool,
    /// Its providers answer a repeated request id from memory (`dedup-ttl-ms`).
    pub deduplicated: bool,
    /// Business error codes that say "try again" (`retry-on-business`).
    pub business: &'a Codes,
}

impl<'a> Rerun<'a> {
    pub fn of(g: &'a Governance) -> Self {
        Rerun {
            idempotent: g.idempotent,
            deduplicated: g.dedup_ttl_ms > 0,
            business: &g.retry_on_business,
        }
    }
}

/// How a failed attempt may continue.
pub fn next(err: &CallError, m: Rerun<'_>) -> Next {
    match err {
        CallError::Remote { class, code, .. } => match class {
            ErrorClass::Overloaded | ErrorClass::ShuttingDown => Next::Failover,
            ErrorClass::Internal | ErrorClass::DeadlineExceeded if m.idempotent => Next::Retry,
            ErrorClass::Business
                if (m.idempotent || m.deduplicated)
                    && code.as_deref().is_some_and(|c| m.business.contains(c)) =>
            {
                Next::Retry
            }
            _ => Next::Final,
        },
        CallError::Transport(t) => match t {
            TransportError::Connect { .. } | TransportError::Draining { .. } => Next::Failover,
            TransportError::Reset { .. } | TransportError::Timeout if m.idempotent => Next::Retry,
            TransportError::Reset { .. } | TransportError::Timeout if m.deduplicated => Next::Again,
            _ => Next::Final,
        },
        _ => Next::Final,
    }
}

/// Whether going on after `err` draws on the retry budget: every retry, and a failover
/// after a provider refused the request (as opposed to one that was never sent).
pub fn costs_budget(err: &CallError, next: Next) -> bool {
    match next {
        Next::Final => false,
        Next::Retry | Next::Again => true,
        Next::Failover => matches!(err, CallError::Remote { .. }),
    }
}

/// The wait before retry number `n` (0-based): `base` doubled per retry, with ±50%
/// jitter so that callers do not retry in lockstep.
pub fn backoff(base: Duration, n: u32) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    let doubled = base.saturating_mul(1 << n.min(16));
    doubled.mul_f64(0.5 + fastrand::f64())
}

/// Whether waiting `wait` still leaves time before `deadline`.
pub fn fits(wait: Duration, deadline: Instant) -> bool {
    Instant::now() + wait < deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(class: ErrorClass) -> CallError {
        CallError::Remote {
            class,
            message: String::new(),
            retry_after_ms: None,
            code: None,
        }
    }

    const NONE: &Codes = &Codes(Vec::new());

    /// A method that is `idempotent` or not, not deduplicated, no business codes.
    fn plain(idempotent: bool) -> Rerun<'static> {
        Rerun {
            idempotent,
            deduplicated: false,
            business: NONE,
        }
    }

    #[test]
    fn only_safe_failures_go_again() {
        let reset = CallError::Transport(TransportError::Reset {
            addr: "a".into(),
            reason: "r".into(),
        });
        let refused = CallError::Transport(TransportError::Connect {
            addr: "a".into(),
            reason: "r".into(),
        });
        let cases = [
            (remote(ErrorClass::Business), true, Next::Final),
            (remote(ErrorClass::Overloaded), false, Next::Failover),
            (remote(ErrorClass::ShuttingDown), false, Next::Failover),
            (remote(ErrorClass::RateLimited), true, Next::Final),
            (remote(ErrorClass::Internal), false, Next::Final),
            (remote(ErrorClass::Internal), true, Next::Retry),
            (reset.clone(), false, Next::Final),
            (reset, true, Next::Retry),
            (refused, false, Next::Failover),
            (
                CallError::Transport(TransportError::Timeout),
                false,
                Next::Final,
            ),
            (
                CallError::Transport(TransportError::Frame("big".into())),
                true,
                Next::Final,
            ),
        ];
        for (err, idempotent, want) in cases {
            assert_eq!(
                next(&err, plain(idempotent)),
                want,
                "{err} idempotent={idempotent}"
            );
        }
    }

    #[test]
    fn failovers_after_a_refusal_cost_budget_unsent_ones_do_not() {
        let refused = CallError::Transport(TransportError::Connect {
            addr: "a".into(),
            reason: "r".into(),
        });
        let draining = CallError::Transport(TransportError::Draining { addr: "a".into() });
        for (err, costs) in [
            (remote(ErrorClass::Overloaded), true),
            (remote(ErrorClass::ShuttingDown), true),
            (refused, false),
            (draining, false),
        ] {
            let next = next(&err, plain(false));
            assert_eq!(next, Next::Failover, "{err}");
            assert_eq!(costs_budget(&err, next), costs, "{err}");
        }
        let internal = remote(ErrorClass::Internal);
        assert!(costs_budget(&internal, next(&internal, plain(true))));
        assert!(!costs_budget(&internal, next(&internal, plain(false))));
    }

    #[test]
    fn listed_business_codes_are_retried_when_running_twice_is_safe() {
        let codes = Codes(vec!["conflict".into()]);
        let business = |code: Option<&str>| CallError::Remote {
            class: ErrorClass::Business,
            message: String::new(),
            retry_after_ms: None,
            code: code.map(str::to_string),
        };
        let method = |idempotent, deduplicated| Rerun {
            idempotent,
            deduplicated,
            business: &codes,
        };
        let listed = business(Some("conflict"));
        assert_eq!(next(&listed, method(true, false)), Next::Retry);
        assert_eq!(next(&listed, method(false, true)), Next::Retry);
        assert_eq!(
            next(&listed, method(false, false)),
            Next::Final,
            "may run twice"
        );
        assert_eq!(
            next(&business(Some("gone")), method(true, true)),
            Next::Final
        );
        assert_eq!(next(&business(None), method(true, true)), Next::Final);
    }

    #[test]
    fn a_lost_answer_of_a_deduplicated_method_goes_back_to_its_endpoint() {
        let reset = CallError::Transport(TransportError::Reset {
            addr: "a".into(),
            reason: "r".into(),
        });
        let dedup = Rerun {
            idempotent: false,
            deduplicated: true,
            business: NONE,
        };
        assert_eq!(next(&reset, dedup), Next::Again);
        assert!(costs_budget(&reset, Next::Again));
        // The provider answered: the first run's answer is the answer.
        assert_eq!(next(&remote(ErrorClass::Internal), dedup), Next::Final);
        // Idempotent ones may go anywhere.
        let both = Rerun {
            idempotent: true,
            ..dedup
        };
        assert_eq!(next(&reset, both), Next::Retry);
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        for n in 0..4 {
            let d = backoff(Duration::from_millis(10), n);
            let base = 10.0 * f64::from(1u32 << n);
            assert!(
                d.as_secs_f64() * 1000.0 >= base * 0.5 && d.as_secs_f64() * 1000.0 <= base * 1.5
            );
        }
        assert_eq!(backoff(Duration::ZERO, 3), Duration::ZERO);
    }
}
