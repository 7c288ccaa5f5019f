//! Per-call options.

use std::time::Duration;

use axle_core::{RequestScope, TraceContext};

/// What a caller may say about one call.
#[derive(Clone, Debug)]
pub struct CallOptions {
    /// The whole call's budget (default: the service's, else
    /// [`axle_manifest::defaults::CALL_DEADLINE`]).
    pub timeout: Option<Duration>,
    /// Affinity key for hashing selectors (0: none).
    pub hash_key: u64,
    /// Request tags (routing: `lane=canary`).
    pub tags: Vec<(String, String)>,
    /// The calling application's name.
    pub consumer_app: Option<String>,
    /// The request comes from outside the trust boundary (internal-only methods refuse).
    pub external: bool,
    /// Whether the method's fallback may answer when the call finally fails.
    pub fallback: bool,
    /// The call's request id (default: a random one per call). A caller retrying on its
    /// own (an HTTP client resending with the same idempotency key) passes the same id, so
    /// a deduplicating provider answers the repeat from memory.
    pub request_id: Option<[u8; 16]>,
    /// The trace this call continues, its span the call's parent (none: the call starts a
    /// trace). `within` sets it from the handler's context; the gateway from an incoming
    /// `traceparent` header.
    pub trace: Option<TraceContext>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: None,
            hash_key: 0,
            tags: Vec::new(),
            consumer_app: None,
            external: false,
            fallback: true,
            request_id: None,
            trace: None,
        }
    }
}

impl CallOptions {
    /// Options with a timeout.
    pub fn timeout(timeout: Duration) -> Self {
        CallOptions {
            timeout: Some(timeout),
            ..CallOptions::default()
        }
    }

    /// Options for a call made while handling a request (`within(&ctx)` with the
    /// handler's context, or any [`RequestScope`]): it inherits what is left of that
    /// request's deadline, its tags (a lane stays a lane), its calling application and
    /// whether it came from outside the trust boundary (an external request stays
    /// external at the next hop) and its trace (the call is a child of the handler's span).
    pub fn within(scope: &impl AsRef<RequestScope>) -> Self {
        let scope = scope.as_ref();
        CallOptions {
            timeout: scope.remaining(),
            tags: scope.tags.clone(),
            consumer_app: scope.consumer_app.clone(),
            external: scope.external,
            trace: scope.trace,
            ..CallOptions::default()
        }
    }

    /// Adds a request tag.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.push((key.into(), value.into()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_call_from_a_handler_inherits_the_remaining_deadline_tags_app_trust_and_trace() {
        let trace = TraceContext {
            trace_id: [1; 16],
            span_id: [2; 8],
            flags: 1,
        };
        let ctx = RequestScope {
            deadline: Some(Instant::now() + Duration::from_millis(300)),
            tags: vec![("lane".into(), "canary".into())],
            consumer_app: Some("web".into()),
            external: true,
            trace: Some(trace),
        };
        let o = CallOptions::within(&ctx);
        let left = o.timeout.unwrap();
        assert!(
            left <= Duration::from_millis(300) && left > Duration::from_millis(200),
            "{left:?}"
        );
        assert_eq!(o.tags, ctx.tags);
        assert_eq!(o.consumer_app.as_deref(), Some("web"));
        assert!(
            o.fallback && o.external,
            "an external request stays external"
        );
        assert_eq!(o.trace, Some(trace), "the handler's span is the parent");
    }
}
