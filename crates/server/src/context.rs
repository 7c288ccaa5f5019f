//! What a handler knows about its request.

use std::net::SocketAddr;

use axle_core::RequestScope;
use axle_wire::ByteString;

/// The request's context, handed to every handler.
#[derive(Clone, Debug)]
pub struct Context {
    /// The names the request came with: slices of its frame (read as `&str`), so
    /// serving a request copies neither. A slice keeps the frame's buffer alive, as the
    /// payload does: to keep a name past the request, copy it (`to_string()`).
    pub service: ByteString,
    pub method: ByteString,
    pub peer: SocketAddr,
    /// The caller's verified identity: the first DNS name of the client certificate it
    /// presented over mTLS (`None` over plain TCP or without client authentication).
    pub peer_identity: Option<String>,
    /// What calls made on this request's behalf inherit: deadline (a call made from
    /// inside the handler should not outlive it), tags, calling application, trust, trace.
    /// `CallOptions::within(&ctx)` hands it on.
    pub scope: RequestScope,
}

impl Context {
    /// Time left before the deadline (`None`: unbounded).
    pub fn remaining(&self) -> Option<std::time::Duration> {
        self.scope.remaining()
    }

    /// The handler's W3C trace context, `00-<32 hex trace id>-<16 hex span id>-<2 hex
    /// flags>`: what to log beside the request, or to send on to a service that is not
    /// called through Axle. The server pipeline always sets one (a request from a peer
    /// sending none starts a trace), so `None` means a context built by hand without one.
    pub fn traceparent(&self) -> Option<String> {
        self.scope.trace.map(|t| t.traceparent())
    }
}

impl AsRef<RequestScope> for Context {
    fn as_ref(&self) -> &RequestScope {
        &self.scope
    }
}
