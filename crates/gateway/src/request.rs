//! An HTTP request read into what an Axle call needs: the call options from the
//! `x-axle-*` headers, and the JSON request object from the body and path parameters.
//! Everything here is the client's input, so every failure is a 400 (or 413 / 408 for a
//! body too large or too slow) that says what was wrong.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Limited};

use axle::client::CallOptions;

use crate::status::HttpError;

/// The deadline header: the call's whole budget in milliseconds.
pub const TIMEOUT_HEADER: &str = "x-axle-timeout-ms";
/// Request tags: `x-axle-tag-lane: canary` is the tag `lane=canary`.
pub const TAG_PREFIX: &str = "x-axle-tag-";
/// The calling application's name.
pub const APP_HEADER: &str = "x-axle-app";
/// The W3C trace context the call continues (a malformed one is ignored and the call
/// starts a trace, as the W3C recommendation asks of a receiver).
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// Set on an answer that is the method's fallback rather than the provider's.
pub const FALLBACK_HEADER: &str = "x-axle-fallback";

/// Tags one request may carry (a client cannot make the router's work unbounded).
const MAX_TAGS: usize = 16;
/// The longest tag key, tag value or application name.
const MAX_TEXT: usize = 128;

/// The call options `headers` ask for: the deadline (capped at `max_timeout`), tags and
/// application, and whether the request counts as external.
pub fn options(
    headers: &HeaderMap,
    max_timeout: Duration,
    external: bool,
) -> Result<CallOptions, HttpError> {
    let text = |name: &str, value: &http::HeaderValue| {
        value
            .to_str()
            .ok()
            .filter(|v| !v.is_empty() && v.len() <= MAX_TEXT)
            .map(str::to_string)
            .ok_or_else(|| {
                HttpError::bad_request(format!(
                    "header `{name}`: expected 1 to {MAX_TEXT} visible ASCII characters"
                ))
            })
    };
    let timeout = match headers.get(TIMEOUT_HEADER) {
        None => max_timeout,
        Some(v) => {
            let ms: u64 = text(TIMEOUT_HEADER, v)?
                .parse()
                .ok()
                .filter(|ms| *ms > 0)
                .ok_or_else(|| {
                    HttpError::bad_request(format!(
                        "header `{TIMEOUT_HEADER}`: expected a whole number of milliseconds above 0"
                    ))
                })?;
            Duration::from_millis(ms).min(max_timeout)
        }
    };
    let mut options = CallOptions {
        timeout: Some(timeout),
        external,
        ..CallOptions::default()
    };
    if let Some(app) = headers.get(APP_HEADER) {
        options.consumer_app = Some(text(APP_HEADER, app)?);
    }
    if let Some(Ok(parent)) = headers.get(TRACEPARENT_HEADER).map(|v| v.to_str()) {
        match axle::core::TraceContext::parse(parent) {
            Ok(trace) => options.trace = Some(trace),
            Err(e) => tracing::debug!("starting a new trace: {e}"),
        }
    }
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(TAG_PREFIX) else {
            continue;
        };
        if key.is_empty() || key.len() > MAX_TEXT {
            return Err(HttpError::bad_request(format!(
                "header `{name}`: a tag key is 1 to {MAX_TEXT} characters"
            )));
        }
        if options.tags.len() == MAX_TAGS {
            return Err(HttpError::bad_request(format!(
                "more than {MAX_TAGS} `{TAG_PREFIX}*` headers"
            )));
        }
        options
            .tags
            .push((key.to_string(), text(name.as_str(), value)?));
    }
    Ok(options)
}

/// Reads a body of at most `max` bytes within `within`.
pub async fn read_body<B>(body: B, max: usize, within: Duration) -> Result<Bytes, HttpError>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let too_large = || {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {max} bytes"),
        )
    };
    if body.size_hint().lower() > max as u64 {
        return Err(too_large());
    }
    match tokio::time::timeout(within, Limited::new(body, max).collect()).await {
        Err(_) => Err(HttpError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("the body did not arrive within {} ms", within.as_millis()),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(HttpError::bad_request(format!("cannot read the body: {e}"))),
    }
}

/// The request object: the body as JSON (empty: `{}`), with the path parameters set on
/// it (a body that is not an object cannot take them).
pub fn request_value(
    body: &[u8],
    params: &[(String, String)],
) -> Result<serde_json::Value, HttpError> {
    let mut value = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_slice(body)
            .map_err(|e| HttpError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    if params.is_empty() {
        return Ok(value);
    }
    let Some(object) = value.as_object_mut() else {
        return Err(HttpError::bad_request(
            "this route takes path parameters, so the body must be a JSON object",
        ));
    };
    for (name, v) in params {
        object.insert(name.clone(), serde_json::Value::String(v.clone()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn headers_become_options_with_the_timeout_capped() {
        let cap = Duration::from_millis(500);
        let o = options(
            &headers(&[
                ("x-axle-timeout-ms", "200"),
                ("x-axle-tag-lane", "canary"),
                ("x-axle-app", "web"),
            ]),
            cap,
            true,
        )
        .unwrap();
        assert_eq!(o.timeout, Some(Duration::from_millis(200)));
        assert_eq!(o.tags, [("lane".to_string(), "canary".to_string())]);
        assert_eq!(o.consumer_app.as_deref(), Some("web"));
        assert!(o.external);
        let o = options(&headers(&[("x-axle-timeout-ms", "90000")]), cap, false).unwrap();
        assert_eq!(o.timeout, Some(cap));
        assert!(!o.external);
        assert_eq!(
            options(&HeaderMap::new(), cap, true).unwrap().timeout,
            Some(cap)
        );
    }

    #[test]
    fn a_traceparent_is_continued_and_a_malformed_one_ignored() {
        let cap = Duration::from_secs(1);
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let o = options(&headers(&[("traceparent", parent)]), cap, true).unwrap();
        assert_eq!(o.trace.map(|t| t.traceparent()).as_deref(), Some(parent));
        let o = options(&headers(&[("traceparent", "00-zz")]), cap, true).unwrap();
        assert_eq!(o.trace, None, "the call starts its own trace");
    }

    #[test]
    fn bad_headers_are_400_naming_the_header() {
        let cap = Duration::from_secs(1);
        for (h, needle) in [
            (
                headers(&[("x-axle-timeout-ms", "soon")]),
                "x-axle-timeout-ms",
            ),
            (headers(&[("x-axle-timeout-ms", "0")]), "x-axle-timeout-ms"),
            (headers(&[("x-axle-app", "")]), "x-axle-app"),
            (
                headers(&[("x-axle-tag-lane", &"x".repeat(200))]),
                "x-axle-tag-lane",
            ),
        ] {
            let e = options(&h, cap, true).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{}", e.message);
        }
        let many: Vec<(String, String)> = (0..17)
            .map(|i| (format!("x-axle-tag-k{i}"), "v".into()))
            .collect();
        let mut h = HeaderMap::new();
        for (k, v) in &many {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        assert!(options(&h, cap, true).is_err());
    }

    #[test]
    fn bodies_and_parameters() {
        let p = vec![("key".to_string(), "a".to_string())];
        assert_eq!(
            request_value(b"", &p).unwrap(),
            serde_json::json!({"key": "a"})
        );
        assert_eq!(
            request_value(br#"{"v": 1, "key": "b"}"#, &p).unwrap(),
            serde_json::json!({"v": 1, "key": "a"})
        );
        assert_eq!(request_value(b"[1]", &[]).unwrap(), serde_json::json!([1]));
        let e = request_value(b"[1]", &p).unwrap_err();
        assert!(e.message.contains("JSON object"), "{}", e.message);
        let e = request_value(b"{\"a\": ", &[]).unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413() {
        let body = http_body_util::Full::new(Bytes::from(vec![b'x'; 100]));
        let e = read_body(body, 10, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        let body = http_body_util::Full::new(Bytes::from_static(b"{}"));
        assert_eq!(
            read_body(body, 10, Duration::from_secs(1)).await.unwrap(),
            "{}"
        );
    }
}
