//! Connections: many requests in flight on one TCP connection, matched by id, answered in
//! any order (`connection`); one multiplexed connection per endpoint, re-dialled with
//! backoff when it breaks (`endpoint`); the provider's side of a connection (`serve`).

mod answer;
pub mod connection;
pub mod defaults;
mod encoding;
pub mod endpoint;
mod pending;
mod sent;
pub mod serve;
pub mod tls;
mod writer;

use std::time::Duration;

/// Keep-alive settings of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Keepalive {
    /// Ping a connection that has been silent this long.
    pub interval: Duration,
    /// Declare it dead when nothing (pong or anything else) arrives this long after a ping.
    pub timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            interval: crate::defaults::PING_INTERVAL,
            timeout: crate::defaults::PING_TIMEOUT,
        }
    }
}

/// Why a call failed below the RPC layer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The endpoint could not be reached (refused, unreachable, or still backing off
    /// after such a failure). The request was never sent.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The connection broke while the request was in flight; the handler may have run.
    #[error("connection to {addr} lost: {reason}")]
    Reset { addr: String, reason: String },
    /// The connection is draining (goaway received) or closed; the request was not sent.
    #[error("connection to {addr} is not accepting requests")]
    Draining { addr: String },
    /// No answer before the deadline; the request was cancelled.
    #[error("no answer within the deadline")]
    Timeout,
    /// The request could not be framed (e.g. over the frame size limit); nothing was sent.
    #[error("cannot send: {0}")]
    Frame(String),
}

impl TransportError {
    /// Whether the request certainly never reached the endpoint (safe to send elsewhere).
    pub fn not_sent(&self) -> bool {
        matches!(
            self,
            TransportError::Connect { .. }
                | TransportError::Draining { .. }
                | TransportError::Frame(_)
        )
    }
}

#[cfg(test)]
mod tests;
