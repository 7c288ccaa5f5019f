//! Per-call options.

use std::time::Duration;

/// What a caller may say about one call.
#[derive(Clone, Debug)]
pub struct CallOptions {
    /// The whole call's budget (default: the service's, else
    /// [`crate::manifest::defaults::CALL_DEADLINE`]).
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

    /// Options for a call made while handling a request: it inherits what is left of that
    /// request's deadline (and its tags, so a lane stays a lane).
    pub fn within(ctx: &crate::server::Context) -> Self {
        CallOptions {
            timeout: ctx.remaining(),
            tags: ctx.tags.clone(),
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
    fn a_call_from_a_handler_inherits_the_remaining_deadline_and_tags() {
        let ctx = crate::server::Context {
            service: "s".into(),
            method: "m".into(),
            deadline: Some(Instant::now() + Duration::from_millis(300)),
            peer: "127.0.0.1:1".parse().unwrap(),
            consumer_app: None,
            tags: vec![("lane".into(), "canary".into())],
        };
        let o = CallOptions::within(&ctx);
        let left = o.timeout.unwrap();
        assert!(
            left <= Duration::from_millis(300) && left > Duration::from_millis(200),
            "{left:?}"
        );
        assert_eq!(o.tags, ctx.tags);
        assert!(o.fallback && !o.external);
    }
}
