//! Error classes ↔ HTTP statuses: the one table both directions read (the gateway
//! answering an HTTP client, the sidecar reading its application's answer), and the JSON
//! error body every refusal carries. `docs/gateway.md` prints the same table.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::Full;

use axle::client::CallError;
use axle::wire::ErrorClass;

/// A refusal on its way to an HTTP client: status, class, message and, for the classes
/// that say "come back later", when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    pub status: StatusCode,
    /// The class named in the body (`rate_limited`, `payload_too_large`, ...).
    pub class: &'static str,
    pub message: String,
    /// `Retry-After`, in milliseconds (sent rounded up to whole seconds).
    pub retry_after_ms: Option<u32>,
}

/// The status of each error class the client can report. Overloaded and shutting-down
/// providers, and refusals with a retry-after, get `Retry-After`.
///
/// | class | status |
/// |---|---|
/// | `bad_request` | 400 |
/// | `forbidden` | 403 |
/// | `not_found` | 404 |
/// | `business` | 422 |
/// | `rate_limited` | 429 + Retry-After |
/// | `internal` | 500 |
/// | `transport`, `bad_response` | 502 |
/// | `overloaded`, `shutting_down` | 503 + Retry-After |
/// | `no_endpoint`, `breaker_open` | 503 |
/// | `deadline_exceeded` | 504 |
pub fn status_of(class: &str) -> StatusCode {
    match class {
        "bad_request" => StatusCode::BAD_REQUEST,
        "forbidden" => StatusCode::FORBIDDEN,
        "not_found" => StatusCode::NOT_FOUND,
        "business" => StatusCode::UNPROCESSABLE_ENTITY,
        "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
        "transport" | "bad_response" => StatusCode::BAD_GATEWAY,
        "overloaded" | "shutting_down" | "no_endpoint" | "breaker_open" => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        "deadline_exceeded" => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The other direction, for the sidecar: what an application's HTTP status means to an
/// Axle caller. 2xx is success (`None`); an application says "no" with any other 4xx
/// (a business error, never retried), and fails with a 5xx.
pub fn class_of(status: StatusCode) -> Option<ErrorClass> {
    Some(match status.as_u16() {
        200..=299 => return None,
        400 | 413 | 415 => ErrorClass::BadRequest,
        403 => ErrorClass::Forbidden,
        404 | 405 => ErrorClass::NotFound,
        429 => ErrorClass::RateLimited,
        503 => ErrorClass::Overloaded,
        504 => ErrorClass::DeadlineExceeded,
        400..=499 => ErrorClass::Business,
        _ => ErrorClass::Internal,
    })
}

impl HttpError {
    /// A refusal the gateway makes itself (`class` names it in the body).
    pub fn new(status: StatusCode, class: &'static str, message: impl Into<String>) -> Self {
        HttpError {
            status,
            class,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        HttpError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        HttpError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A call that failed, by its class.
    pub fn from_call(e: &CallError) -> Self {
        let class = e.class();
        let (message, retry_after_ms) = match e {
            CallError::Remote {
                message,
                retry_after_ms,
                ..
            } => (message.clone(), *retry_after_ms),
            other => (other.to_string(), None),
        };
        HttpError {
            status: status_of(class),
            class,
            message,
            retry_after_ms: retry_after(class, retry_after_ms),
        }
    }

    /// `{"error": {"class": ..., "message": ...}}` with its status and headers.
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let body = serde_json::json!({
            "error": { "class": self.class, "message": self.message }
        });
        let mut response = json_response(self.status, body.to_string().into());
        if let Some(ms) = self.retry_after_ms {
            // Whole seconds, rounded up, at least one: "0" would invite a busy loop.
            let secs = (u64::from(ms)).div_ceil(1000).max(1);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The classes that mean "come back later" always get `Retry-After` (the provider's,
/// else the least: one second).
fn retry_after(class: &str, provider_said: Option<u32>) -> Option<u32> {
    match class {
        "rate_limited" | "overloaded" | "shutting_down" => Some(provider_said.unwrap_or(0)),
        _ => provider_said,
    }
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axle::transport::TransportError;

    #[test]
    fn every_wire_class_has_its_documented_status() {
        let expect = [
            (ErrorClass::Business, 422),
            (ErrorClass::Overloaded, 503),
            (ErrorClass::ShuttingDown, 503),
            (ErrorClass::RateLimited, 429),
            (ErrorClass::DeadlineExceeded, 504),
            (ErrorClass::NotFound, 404),
            (ErrorClass::BadRequest, 400),
            (ErrorClass::Forbidden, 403),
            (ErrorClass::Internal, 500),
        ];
        assert_eq!(expect.len(), ErrorClass::ALL.len());
        for (class, status) in expect {
            assert_eq!(status_of(class.as_str()).as_u16(), status, "{class}");
        }
        assert_eq!(status_of("transport"), StatusCode::BAD_GATEWAY);
        assert_eq!(status_of("no_endpoint"), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            HttpError::from_call(&CallError::Transport(TransportError::Timeout)).status,
            StatusCode::GATEWAY_TIMEOUT
        );
    }

    #[test]
    fn a_wire_class_survives_http_and_back() {
        // The sidecar reads what the gateway would have written for each class.
        for class in ErrorClass::ALL {
            let status = status_of(class.as_str());
            let back = class_of(status).unwrap();
            let same = back == class
                || (class == ErrorClass::ShuttingDown && back == ErrorClass::Overloaded);
            assert!(same, "{class} → {status} → {back}");
        }
        assert_eq!(class_of(StatusCode::OK), None);
        assert_eq!(class_of(StatusCode::CONFLICT), Some(ErrorClass::Business));
        assert_eq!(
            class_of(StatusCode::BAD_GATEWAY),
            Some(ErrorClass::Internal)
        );
    }

    #[test]
    fn busy_answers_carry_retry_after_in_whole_seconds() {
        let busy = |class: &'static str, said: Option<u32>| HttpError {
            status: status_of(class),
            class,
            message: "busy".into(),
            retry_after_ms: retry_after(class, said),
        };
        let r = busy("rate_limited", Some(1500)).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        let r = busy("shutting_down", None).into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = busy("internal", None).into_response();
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }
}
