//! Axle's HTTP face, for clients and applications that do not speak Axle's protocol
//! (`docs/gateway.md`):
//!
//! - the **gateway** (`axle gateway`): HTTP/1.1 and HTTP/2 at the edge, each request one
//!   call through the full client pipeline, marked external (the trust boundary of
//!   `docs/security.md`), errors mapped to statuses by one table ([`status`]);
//! - the **sidecar** (`axle sidecar`): beside an application in any language, it serves
//!   the application's services over Axle (forwarding each request to the application
//!   as `POST /{service}/{method}`, [`sidecar`]) and gives the application a loopback HTTP
//!   listener through which it calls other services (the gateway's code, not external).
//!
//! One concern per module: [`routes`] (which method a request calls), [`request`]
//! (headers and body → call), [`forward`] (HTTP → call → HTTP), [`limit`] (the limiter
//! keyed on the HTTP client), [`listener`] (connections, timeouts, graceful stop).

pub mod forward;
pub mod limit;
pub mod listener;
pub mod request;
pub mod routes;
pub mod sidecar;
pub mod status;

pub use forward::{services, Forwarder};
pub use limit::ClientLimiter;
pub use listener::HttpListener;
