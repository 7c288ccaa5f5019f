//! Why a call failed, with the error class `axle call` names.

use axle_transport::TransportError;
use axle_wire::ErrorClass;

/// A failed call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The client knows no such service.
    #[error("no such service `{0}` (not in the manifest)")]
    NoSuchService(String),
    /// No endpoint is left for this request (none configured, or routing filtered all).
    #[error("no endpoint for {service}: {reason}")]
    NoEndpoint { service: String, reason: String },
    /// The service+method breaker is open: the call failed fast, nothing was sent.
    #[error("circuit open for {target}: failing fast")]
    BreakerOpen { target: String },
    /// The request could not be encoded.
    #[error("cannot encode the request: {0}")]
    Encode(String),
    /// The response could not be decoded.
    #[error("cannot decode the response: {0}")]
    Decode(String),
    /// Below RPC: connect, reset, deadline.
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// The provider answered with an error class.
    #[error("{class}: {message}")]
    Remote {
        class: ErrorClass,
        message: String,
        retry_after_ms: Option<u32>,
        /// With `business`: the handler's machine-readable reason, if it gave one.
        code: Option<String>,
    },
    /// An interceptor refused the call: before it was sent (`client-before`, nothing was
    /// sent), or once it had its answer (`client-after`, the answer was replaced).
    #[error("refused by interceptor `{interceptor}`: {class}: {message}")]
    Intercepted {
        interceptor: String,
        class: ErrorClass,
        message: String,
    },
}

impl CallError {
    /// The error class as users see it (`rate_limited`, `transport`, ...).
    pub fn class(&self) -> &'static str {
        match self {
            CallError::NoSuchService(_) => "not_found",
            CallError::NoEndpoint { .. } => "no_endpoint",
            CallError::BreakerOpen { .. } => "breaker_open",
            CallError::Encode(_) => "bad_request",
            CallError::Decode(_) => "bad_response",
            CallError::Transport(TransportError::Timeout) => "deadline_exceeded",
            CallError::Transport(_) => "transport",
            CallError::Remote { class, .. } => class.as_str(),
            CallError::Intercepted { class, .. } => class.as_str(),
        }
    }
}
