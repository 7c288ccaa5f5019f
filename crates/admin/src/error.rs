//! What can go wrong serving or asking the admin endpoint.

use axle_transport::TransportError;
use axle_wire::ErrorClass;

/// An admin endpoint's or an admin request's failure.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The admin endpoint answers anything asked of it (stats today, plugin swaps
    /// tomorrow), so it stays on loopback unless its operator says otherwise.
    #[error(
        "refusing to expose the admin endpoint on {addr} ({ip} is not a loopback address); \
         bind it to 127.0.0.1 or ::1, or allow it explicitly (--admin-public)"
    )]
    NotLoopback { addr: String, ip: std::net::IpAddr },
    #[error("cannot resolve {addr}: {reason}")]
    Resolve { addr: String, reason: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("admin request to {addr}: {source}")]
    Transport {
        addr: String,
        #[source]
        source: TransportError,
    },
    /// The endpoint answered with an error (`not_found` for a method it does not have).
    #[error("admin endpoint answered {class}: {message}")]
    Remote { class: ErrorClass, message: String },
    /// The admin token could not be configured (`--admin-token-file`, `AXLE_ADMIN_TOKEN`).
    #[error("admin token: {0}")]
    Token(String),
    #[error("admin answer is not the JSON expected: {0}")]
    Json(String),
}
