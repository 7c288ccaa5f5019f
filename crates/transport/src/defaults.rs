//! The transport's defaults (the manifest's `defaults` index re-exports them, so every
//! default can be read in one place).

use std::time::Duration;

/// Ping a connection that has been silent this long.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// A connection that answers nothing this long after a ping is dead.
pub const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// First wait before re-dialling an endpoint that refused a connection; doubles per
/// failure up to [`RECONNECT_BACKOFF_MAX`].
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// Longest wait between dials of an unreachable endpoint.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Time allowed to establish a connection (TCP, and the TLS handshake when there is one).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Frames queued for a connection's writer before callers wait.
pub const WRITE_QUEUE: usize = 1024;

/// Time a provider gives a caller to finish its TLS handshake (a peer that opens a
/// connection and says nothing holds only this long).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections a provider holds open at once. At the cap a new connection displaces the
/// longest-idle one with nothing in flight (told by a goaway; a real caller re-dials), and
/// is refused only when every connection is busy.
pub const MAX_CONNECTIONS: usize = 10_000;

/// A provider closes (with a goaway) a connection that has carried nothing, and has
/// nothing in flight, for this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A frame that has started to arrive must finish within this (a peer sending a byte a
/// second holds a connection only this long; checked every such period, so a stalled
/// frame is closed within twice it).
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// Requests one connection may have in flight at a provider; past it, `overloaded` (the
/// caller fails over).
pub const MAX_REQUESTS_PER_CONNECTION: usize = 1_000;

/// Bytes of request payloads one connection may have in flight at a provider; past it,
/// `overloaded`.
pub const MAX_BUFFERED_BYTES: usize = 64 << 20;
