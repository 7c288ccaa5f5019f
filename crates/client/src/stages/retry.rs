//! Which failures may be sent again, and when.
//!
//! - Refusals that prove the handler did not run (`overloaded`, `shutting_down`) and
//!   connections that never carried the request (refused, draining) **fail over**: another
//!   endpoint is tried, without using up `retries` (the seeds' overflow failover), at most
//!   `max-failovers` times per call.
//! - Timeouts, resets and `internal` errors after the request was sent are **retried only
//!   for idempotent methods**: the handler may have run.
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
}

/// How a failed attempt may continue.
pub fn next(err: &CallError, idempotent: bool) -> Next {
    match err {
        CallError::Remote { class, .. } => match class {
            ErrorClass::Overloaded | ErrorClass::ShuttingDown => Next::Failover,
            ErrorClass::Internal | ErrorClass::DeadlineExceeded if idempotent => Next::Retry,
            _ => Next::Final,
        },
        CallError::Transport(t) => match t {
            TransportError::Connect { .. } | TransportError::Draining { .. } => Next::Failover,
            TransportError::Reset { .. } | TransportError::Timeout if idempotent => Next::Retry,
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
        Next::Retry => true,
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
                next(&err, idempotent),
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
            let next = next(&err, false);
            assert_eq!(next, Next::Failover, "{err}");
            assert_eq!(costs_budget(&err, next), costs, "{err}");
        }
        let internal = remote(ErrorClass::Internal);
        assert!(costs_budget(&internal, next(&internal, true)));
        assert!(!costs_budget(&internal, next(&internal, false)));
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
