//! The OTLP/JSON mapping of a batch (`ExportTraceServiceRequest`): resourceSpans →
//! scopeSpans → spans, ids as hex, times as decimal strings of Unix nanoseconds, 64-bit
//! integers as strings, enums as numbers, as the OTLP specification's JSON encoding says.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value as Json};

use super::layer::{Finished, Value};

/// `SPAN_KIND_INTERNAL`, `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`.
const INTERNAL: u8 = 1;
const SERVER: u8 = 2;
const CLIENT: u8 = 3;
/// `STATUS_CODE_ERROR`.
const ERROR: u8 = 2;

/// A call spans its attempts inside the caller; an attempt is the request sent; a
/// handler serves one.
fn kind(name: &str) -> u8 {
    match name {
        "attempt" => CLIENT,
        "handler" => SERVER,
        _ => INTERNAL,
    }
}

fn nanos(t: SystemTime) -> String {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        .to_string()
}

fn attribute(key: &str, value: &Value) -> Json {
    let value = match value {
        Value::Str(s) => json!({ "stringValue": s }),
        Value::Int(i) => json!({ "intValue": i.to_string() }),
    };
    json!({ "key": key, "value": value })
}

fn span(s: &Finished) -> Json {
    let mut attributes: Vec<Json> = s.attributes.iter().map(|(k, v)| attribute(k, v)).collect();
    let mut out = json!({
        "traceId": s.trace_id.to_ascii_lowercase(),
        "spanId": s.span_id.to_ascii_lowercase(),
        "name": s.name,
        "kind": kind(s.name),
        "startTimeUnixNano": nanos(s.start),
        "endTimeUnixNano": nanos(s.end),
    });
    if let Some(parent) = &s.parent_span_id {
        out["parentSpanId"] = json!(parent.to_ascii_lowercase());
    }
    if let Some(class) = &s.error {
        attributes.push(attribute("error", &Value::Str(class.clone())));
        out["status"] = json!({ "code": ERROR, "message": class });
    }
    out["attributes"] = Json::Array(attributes);
    out
}

/// One request body for `spans`, all under one resource named `service`.
pub(crate) fn encode(service: &str, spans: &[Finished]) -> Vec<u8> {
    let body = json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [attribute("service.name", &Value::Str(service.to_string()))]
            },
            "scopeSpans": [{
                "scope": { "name": "axle", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans.iter().map(span).collect::<Vec<_>>(),
            }],
        }],
    });
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_failed_attempt_is_encoded_as_the_otlp_json_mapping_says() {
        let start = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let attempt = Finished {
            name: "attempt",
            trace_id: "0AF7651916CD43DD8448EB211C80319C".into(),
            span_id: "00f067aa0ba902b7".into(),
            parent_span_id: Some("b7ad6b7169203331".into()),
            start,
            end: start + Duration::from_millis(2),
            attributes: vec![
                ("service", Value::Str("echo".into())),
                ("attempt", Value::Int(2)),
            ],
            error: Some("transport".into()),
        };
        let body: Json = serde_json::from_slice(&encode("shop", &[attempt])).unwrap();
        let resource = &body["resourceSpans"][0];
        assert_eq!(
            resource["resource"]["attributes"][0],
            json!({"key": "service.name", "value": {"stringValue": "shop"}})
        );
        let span = &resource["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(span["parentSpanId"], "b7ad6b7169203331");
        assert_eq!(span["kind"], CLIENT);
        assert_eq!(span["startTimeUnixNano"], "1700000000123456789");
        assert_eq!(span["endTimeUnixNano"], "1700000000125456789");
        assert_eq!(span["attributes"][1]["value"]["intValue"], "2");
        assert_eq!(span["attributes"][2]["value"]["stringValue"], "transport");
        assert_eq!(
            span["status"],
            json!({"code": ERROR, "message": "transport"})
        );
    }

    #[test]
    fn a_root_span_has_no_parent_and_no_status() {
        let now = SystemTime::now();
        let call = Finished {
            name: "call",
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            parent_span_id: None,
            start: now,
            end: now,
            attributes: Vec::new(),
            error: None,
        };
        let body: Json = serde_json::from_slice(&encode("axle", &[call])).unwrap();
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert!(span.get("parentSpanId").is_none() && span.get("status").is_none());
        assert_eq!(span["kind"], INTERNAL);
    }
}
