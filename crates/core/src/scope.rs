//! What a request carries from caller to provider and on to the next hop: its deadline,
//! its tags (a lane stays a lane), the calling application, whether it entered from
//! outside the trust boundary and its trace context (the trace it belongs to and the span
//! it runs in, so the next hop's spans are its children). A provider's handler hands its request's scope to the calls
//! it makes (`CallOptions::within`), so none of these is lost or reset at a hop.

use std::time::{Duration, Instant};

use crate::trace::TraceContext;

/// The part of a request that the calls made on its behalf inherit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestScope {
    /// When the caller's budget runs out (none: no deadline).
    pub deadline: Option<Instant>,
    /// Request tags (`lane=canary`).
    pub tags: Vec<(String, String)>,
    /// The calling application's name, as it said.
    pub consumer_app: Option<String>,
    /// The request entered from outside the trust boundary.
    pub external: bool,
    /// The trace the request belongs to and the handler's own span (calls made within it
    /// are its children); `None` outside a handler.
    pub trace: Option<TraceContext>,
}

impl RequestScope {
    /// Time left before the deadline (`None`: unbounded).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.expired_at(Instant::now())
    }

    /// Whether the deadline has passed at `now` (a reading the caller takes anyway).
    pub fn expired_at(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }
}

impl AsRef<RequestScope> for RequestScope {
    fn as_ref(&self) -> &RequestScope {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_and_expired() {
        let mut s = RequestScope::default();
        assert_eq!(s.remaining(), None);
        assert!(!s.expired());
        s.deadline = Some(Instant::now() + Duration::from_secs(10));
        assert!(s.remaining().unwrap() > Duration::from_secs(9));
        s.deadline = Some(Instant::now() - Duration::from_millis(1));
        assert!(s.expired());
        assert_eq!(s.remaining(), Some(Duration::ZERO));
    }
}
