//! Per-call options.

use std::time::Duration;

/// What a caller may say about one call.
#[derive(Clone, Debug, Default)]
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
}

impl CallOptions {
    /// Options with a timeout.
    pub fn timeout(timeout: Duration) -> Self {
        CallOptions {
            timeout: Some(timeout),
            ..CallOptions::default()
        }
    }

    /// Adds a request tag.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.push((key.into(), value.into()));
        self
    }
}
