//! # axle-core — what every Axle crate shares
//!
//! The vocabulary below every other crate: the kernel clock, the request scope a call
//! carries from caller to provider and on to the next hop (its W3C trace context
//! included), the one EWMA and the one latency histogram every measurement uses, counts
//! kept per thread where every request writes them, the address and name checks every
//! input goes through, the comparison of names the request path uses, an endpoint as
//! configuration lists it, and the payload model that typed calls are translated into
//! before a serializer plugin sees them.

pub mod clock;
pub mod descriptors;
pub mod endpoint;
pub mod ewma;
pub mod latency;
pub mod network;
pub mod payload;
pub mod scope;
pub mod striped;
pub mod text;
pub mod trace;
pub mod validate;

pub use clock::{now_ns, ns_at};
pub use endpoint::EndpointSpec;
pub use scope::RequestScope;
pub use trace::TraceContext;
