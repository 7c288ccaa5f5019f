//! The interceptor kind's vocabulary (`interface interception` in `sdk/wit/kinds.wit`):
//! where an interceptor runs, what it reads of a call, and what it may answer.

/// Where in a call an interceptor runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InterceptPoint {
    /// On the caller, once per call, before routing: tags set here route the call.
    ClientBefore,
    /// On the caller, once the call has its final answer (after retries, before fallback).
    ClientAfter,
    /// On the provider, after the trust boundary, before the limiter and the handler.
    ServerBefore,
    /// On the provider, once the request was answered.
    ServerAfter,
}

impl InterceptPoint {
    /// Every point, in the order a call meets them.
    pub const ALL: [InterceptPoint; 4] = [
        InterceptPoint::ClientBefore,
        InterceptPoint::ServerBefore,
        InterceptPoint::ServerAfter,
        InterceptPoint::ClientAfter,
    ];

    /// The point's name as the WIT and the docs spell it (`client-before`).
    pub fn name(self) -> &'static str {
        match self {
            InterceptPoint::ClientBefore => "client-before",
            InterceptPoint::ClientAfter => "client-after",
            InterceptPoint::ServerBefore => "server-before",
            InterceptPoint::ServerAfter => "server-after",
        }
    }

    /// Whether the point comes before the call ran (where tags may still change).
    pub fn is_before(self) -> bool {
        matches!(
            self,
            InterceptPoint::ClientBefore | InterceptPoint::ServerBefore
        )
    }
}

/// The parts of a call an interceptor reads. The kernel fills only these; when none of
/// the per-call parts ([`InterceptReads::per_call`]) is read, answers are memoised per
/// distinct value of the parts read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InterceptReads {
    /// The request's tags.
    pub tags: bool,
    /// The calling application's name.
    pub consumer: bool,
    /// The caller's IP address (provider side).
    pub peer: bool,
    /// The W3C `traceparent` (per call).
    pub trace: bool,
    /// What is left of the deadline (per call).
    pub deadline: bool,
    /// The payload's size (per call).
    pub payload_size: bool,
    /// The payload itself (per call; the manifest must grant it).
    pub payload: bool,
    /// At the after points: the answer's error class.
    pub outcome: bool,
}

impl InterceptReads {
    /// Whether any part read changes from call to call, so no answer can be memoised.
    pub fn per_call(&self) -> bool {
        self.trace || self.deadline || self.payload_size || self.payload
    }
}

/// What an interceptor declares once, after `init`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterceptDeclaration {
    /// The points it runs at; it is skipped at every other point.
    pub points: Vec<InterceptPoint>,
    /// The parts of a call it reads.
    pub reads: InterceptReads,
}

/// One call at one point. Parts not declared in [`InterceptReads`] are empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterceptCall {
    /// Where the call is now.
    pub point: InterceptPoint,
    /// Service name.
    pub service: String,
    /// Method name.
    pub method: String,
    /// The request's tags.
    pub tags: Vec<(String, String)>,
    /// The calling application's name ("" if unknown).
    pub consumer_app: String,
    /// The caller's IP address as text (provider side; "" on the caller).
    pub peer: String,
    /// The W3C `traceparent` ("" when not traced).
    pub traceparent: String,
    /// Microseconds left of the deadline (0 when none).
    pub deadline_left_us: u64,
    /// The request payload's size in bytes.
    pub payload_size: u32,
    /// The request payload, when declared and granted.
    pub payload: Option<Vec<u8>>,
    /// At the after points: "" for a success, else the error class's name.
    pub outcome: String,
}

impl InterceptCall {
    /// The value of tag `key`, if the call carries it.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A refusal: the call fails with this error class and message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// An error class by its name (`forbidden`, `bad-request`, ...; `_` or `-`).
    pub class: String,
    /// Why, for the caller.
    pub message: String,
}

/// An interceptor's answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InterceptVerdict {
    /// Go on unchanged.
    Pass,
    /// Before points only: the call's tags become these.
    SetTags(Vec<(String, String)>),
    /// Fail the call (before: not sent / not run; after: the answer is replaced).
    Refuse(Refusal),
}
