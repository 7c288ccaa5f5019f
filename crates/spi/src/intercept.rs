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

/// Writes `point_in` and `point_out`: [`InterceptPoint`] from and to the `point` enum of a
/// binding of `interface interception`. The kernel (wasmtime's bindings) and the SDK
/// (wit-bindgen's) each generate their own enum from the WIT, so neither can name the
/// other's; this keeps the one variant-for-variant mapping in one place. The visibility
/// given applies to both functions.
///
/// ```ignore
/// axle_spi::intercept_point_conversions!(pub(crate) wi::Point);
/// ```
#[macro_export]
macro_rules! intercept_point_conversions {
    ($vis:vis $($point:ident)::+) => {
        /// The [`InterceptPoint`]($crate::InterceptPoint) a WIT `point` names.
        $vis fn point_in(p: $($point)::+) -> $crate::InterceptPoint {
            match p {
                $($point)::+::ClientBefore => $crate::InterceptPoint::ClientBefore,
                $($point)::+::ClientAfter => $crate::InterceptPoint::ClientAfter,
                $($point)::+::ServerBefore => $crate::InterceptPoint::ServerBefore,
                $($point)::+::ServerAfter => $crate::InterceptPoint::ServerAfter,
            }
        }

        /// The WIT `point` of an [`InterceptPoint`]($crate::InterceptPoint).
        $vis fn point_out(p: $crate::InterceptPoint) -> $($point)::+ {
            match p {
                $crate::InterceptPoint::ClientBefore => $($point)::+::ClientBefore,
                $crate::InterceptPoint::ClientAfter => $($point)::+::ClientAfter,
                $crate::InterceptPoint::ServerBefore => $($point)::+::ServerBefore,
                $crate::InterceptPoint::ServerAfter => $($point)::+::ServerAfter,
            }
        }
    };
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

/// The error classes a refusal may name (snake case, as the kernel spells them). Classes
/// that describe the kernel's own states (`deadline_exceeded`, `shutting_down`) are not
/// the plugin's to claim: the kernel takes a refusal naming one as an invalid answer. Here
/// so that a plugin checking its config and the kernel checking its answers agree.
pub const REFUSAL_CLASSES: [&str; 7] = [
    "forbidden",
    "bad_request",
    "rate_limited",
    "overloaded",
    "business",
    "not_found",
    "internal",
];

/// The class name a refusal may use, in the kernel's spelling (`bad-request` and
/// `bad_request` both read as `bad_request`); `None` for a class not in
/// [`REFUSAL_CLASSES`].
pub fn refusal_class(name: &str) -> Option<&'static str> {
    let name = name.trim().replace('-', "_");
    REFUSAL_CLASSES.into_iter().find(|c| *c == name)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a binding's `point` enum.
    mod wi {
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Point {
            ClientBefore,
            ClientAfter,
            ServerBefore,
            ServerAfter,
        }
    }

    crate::intercept_point_conversions!(wi::Point);

    #[test]
    fn points_map_to_the_binding_variant_of_the_same_name_and_back() {
        for p in InterceptPoint::ALL {
            let out = point_out(p);
            let wit_name = format!("{out:?}");
            let expected: String = p
                .name()
                .split('-')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            assert_eq!(wit_name, expected);
            assert_eq!(point_in(out), p);
        }
    }

    #[test]
    fn refusal_classes_read_in_either_spelling_and_only_the_plugins_own() {
        assert_eq!(refusal_class("bad-request"), Some("bad_request"));
        assert_eq!(refusal_class(" rate_limited "), Some("rate_limited"));
        for name in REFUSAL_CLASSES {
            assert_eq!(refusal_class(name), Some(name));
        }
        for kernel_only in ["deadline-exceeded", "shutting_down", "teapot", ""] {
            assert_eq!(refusal_class(kernel_only), None, "{kernel_only}");
        }
    }
}
