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
