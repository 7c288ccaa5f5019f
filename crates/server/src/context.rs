//! What a handler knows about its request.

use std::net::SocketAddr;

use axle_core::RequestScope;

/// The request's context, handed to every handler.
#[derive(Clone, Debug)]
pub struct Context {
    pub service: String,
    pub method: String,
    pub peer: SocketAddr,
    /// The caller's verified identity: the first DNS name of the client certificate it
    /// presented over mTLS (`None` over plain TCP or without client authentication).
    pub peer_identity: Option<String>,
    /// What calls made on this request's behalf inherit: deadline (a call made from
    /// inside the handler should not outlive it), tags, calling application, trust.
    /// `CallOptions::within(&ctx)` hands it on.
    pub scope: RequestScope,
}

impl Context {
    /// Time left before the deadline (`None`: unbounded).
    pub fn remaining(&self) -> Option<std::time::Duration> {
        self.scope.remaining()
    }
}

impl AsRef<RequestScope> for Context {
    fn as_ref(&self) -> &RequestScope {
        &self.scope
    }
}
