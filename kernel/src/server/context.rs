//! What a handler knows about its request.

use std::net::SocketAddr;
use std::time::Instant;

/// The request's context, handed to every handler.
#[derive(Clone, Debug)]
pub struct Context {
    pub service: String,
    pub method: String,
    /// When the caller's budget runs out (none: no deadline). A call made from inside the
    /// handler should not outlive it.
    pub deadline: Option<Instant>,
    pub peer: SocketAddr,
    pub consumer_app: Option<String>,
    pub tags: Vec<(String, String)>,
}

impl Context {
    /// Time left before the deadline (`None`: unbounded).
    pub fn remaining(&self) -> Option<std::time::Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}
