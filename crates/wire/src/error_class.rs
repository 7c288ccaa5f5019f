//! Error classes carried in response frames; each has one meaning to the caller
//! (`docs/wire.md`; `docs/architecture.md`, "The request path").

use std::fmt;

/// Why a call did not succeed, as the provider classified it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The handler ran and said no. Never retried, never trips a breaker.
    Business = 1,
    /// The provider refused without running the handler: too busy. Fail over.
    Overloaded = 2,
    /// The provider refused without running the handler: closing. Fail over.
    ShuttingDown = 3,
    /// The limiter refused; back off for retry-after.
    RateLimited = 4,
    /// The budget ran out.
    DeadlineExceeded = 5,
    /// No such service or method.
    NotFound = 6,
    /// The request was malformed or could not be decoded.
    BadRequest = 7,
    /// An internal-only method was called from outside.
    Forbidden = 8,
    /// The provider failed unexpectedly.
    Internal = 9,
}

impl ErrorClass {
    /// Every class, in code order.
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::Business,
        ErrorClass::Overloaded,
        ErrorClass::ShuttingDown,
        ErrorClass::RateLimited,
        ErrorClass::DeadlineExceeded,
        ErrorClass::NotFound,
        ErrorClass::BadRequest,
        ErrorClass::Forbidden,
        ErrorClass::Internal,
    ];

    /// The class with wire code `code`.
    pub fn from_code(code: u8) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| *c as u8 == code)
    }

    /// The class's name as users see it (`rate_limited`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Business => "business",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::ShuttingDown => "shutting_down",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::DeadlineExceeded => "deadline_exceeded",
            ErrorClass::NotFound => "not_found",
            ErrorClass::BadRequest => "bad_request",
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::Internal => "internal",
        }
    }

    /// Whether the provider guarantees the handler did not run (safe to send elsewhere,
    /// whatever the method).
    pub fn handler_did_not_run(self) -> bool {
        matches!(
            self,
            ErrorClass::Overloaded
                | ErrorClass::ShuttingDown
                | ErrorClass::RateLimited
                | ErrorClass::NotFound
                | ErrorClass::BadRequest
                | ErrorClass::Forbidden
        )
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::from_code(c as u8), Some(c));
        }
        assert_eq!(ErrorClass::from_code(0), None);
        assert_eq!(ErrorClass::from_code(10), None);
    }
}
