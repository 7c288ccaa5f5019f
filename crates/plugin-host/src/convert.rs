//! The edge between the kernel's native SPI types (`axle-spi`) and the bindings wasmtime
//! generates from the WIT: everything above this crate speaks `axle-spi`, and values are
//! converted here, once, as they cross into or out of a component.
//!
//! Per-call conversions are field copies (an outcome, a key, a verdict); tables convert
//! only when they change; serializer values move their strings rather than copy them on
//! the way out.

use crate::bindings::{health_scorer, router, serializer, two_choice_selector, wit};
use axle_spi as spi;

/// An enum with the same unit variants on both sides.
macro_rules! same_enum {
    ($spi:ty, $wit:ty, [$($variant:ident),*]) => {
        impl From<$spi> for $wit {
            fn from(v: $spi) -> $wit {
                match v { $(<$spi>::$variant => <$wit>::$variant),* }
            }
        }
        impl From<$wit> for $spi {
            fn from(v: $wit) -> $spi {
                match v { $(<$wit>::$variant => <$spi>::$variant),* }
            }
        }
    };
}

same_enum!(
    spi::OutcomeClass,
    wit::OutcomeClass,
    [Success, Rejected, Timeout, Failure]
);
same_enum!(
    spi::LogLevel,
    wit::LogLevel,
    [Trace, Debug, Info, Warn, Error]
);
same_enum!(
    spi::HealthState,
    health_scorer::axle::spi::health::HealthState,
    [Healthy, Subhealthy, Dead]
);

/// A plugin's config list, for `init` (once per instance start).
pub fn config(c: &[(String, spi::ConfigValue)]) -> Vec<(String, wit::ConfigValue)> {
    c.iter()
        .map(|(k, v)| {
            let v = match v {
                spi::ConfigValue::Flag(b) => wit::ConfigValue::Flag(*b),
                spi::ConfigValue::Int(i) => wit::ConfigValue::Int(*i),
                spi::ConfigValue::Float(f) => wit::ConfigValue::Float(*f),
                spi::ConfigValue::Text(s) => wit::ConfigValue::Text(s.clone()),
                spi::ConfigValue::Texts(t) => wit::ConfigValue::Texts(t.clone()),
            };
            (k.clone(), v)
        })
        .collect()
}

/// An outcome (selector feedback).
pub fn outcome(o: &spi::Outcome) -> wit::Outcome {
    wit::Outcome {
        endpoint: o.endpoint,
        class: o.class.into(),
        latency_ns: o.latency_ns,
    }
}

/// Facts for `host.facts`.
pub fn facts(f: spi::EndpointFacts) -> wit::EndpointFacts {
    wit::EndpointFacts {
        in_flight: f.in_flight,
        ewma_latency_ns: f.ewma_latency_ns,
        weight: f.weight,
        window_total: f.window_total,
        window_failures: f.window_failures,
        age_ns: f.age_ns,
    }
}

/// An endpoint table, when it changes.
pub fn table(t: &spi::EndpointTable) -> wit::EndpointTable {
    wit::EndpointTable {
        version: t.version(),
        endpoints: t
            .endpoints()
            .iter()
            .map(|e| wit::Endpoint {
                id: e.id,
                address: e.address.clone(),
                weight: e.weight,
                tags: e.tags.clone(),
            })
            .collect(),
    }
}

/// A routing request.
pub fn route_request(r: &spi::RouteRequest) -> router::axle::spi::routing::Request {
    router::axle::spi::routing::Request {
        service: r.service.clone(),
        method: r.method.clone(),
        tags: r.tags.clone(),
        consumer_app: r.consumer_app.clone(),
        caller_address: r.caller_address.clone(),
        fields: r.fields.clone(),
    }
}

/// A two-choice selector's measure, out of a component (once, at load).
pub fn load_measure(m: two_choice_selector::axle::spi::balancing::LoadMeasure) -> spi::LoadMeasure {
    spi::LoadMeasure {
        per_weight: m.per_weight,
        latency: m.latency,
        default_latency_ns: m.default_latency_ns,
    }
}

/// A router's declaration, out of a component (once, at load).
pub fn route_reads(r: router::axle::spi::routing::RouteReads) -> spi::RouteReads {
    use router::axle::spi::routing::TagReads as W;
    spi::RouteReads {
        tags: match r.tags {
            W::None => spi::TagReads::None,
            W::Keys(keys) => spi::TagReads::Keys(keys),
            W::All => spi::TagReads::All,
        },
        consumer_app: r.consumer_app,
        caller_address: r.caller_address,
        method: r.method,
        fields: r.fields,
    }
}

/// Window statistics for a health scorer.
pub fn window_stats(s: &spi::WindowStats) -> health_scorer::axle::spi::health::WindowStats {
    health_scorer::axle::spi::health::WindowStats {
        endpoint: s.endpoint,
        window_ms: s.window_ms,
        total: s.total,
        timeouts: s.timeouts,
        failures: s.failures,
        rejected: s.rejected,
        consecutive_failures: s.consecutive_failures,
        heartbeat_failures: s.heartbeat_failures,
        ewma_latency_ns: s.ewma_latency_ns,
        previous: s.previous.into(),
    }
}

/// A verdict, out of a component.
pub fn verdict_out(v: health_scorer::axle::spi::health::Verdict) -> spi::Verdict {
    spi::Verdict {
        state: v.state.into(),
        weight_permille: v.weight_permille,
    }
}

/// A limiter's answer: 0 admits, anything else refuses with that retry-after in ms.
pub fn admission(retry_after_ms: u32) -> spi::Admission {
    match retry_after_ms {
        0 => spi::Admission::Admit,
        ms => spi::Admission::Reject { retry_after_ms: ms },
    }
}

/// A value, into a serializer (copied: the caller keeps its value).
pub fn value_in(v: &spi::Value) -> serializer::axle::spi::values::Value {
    use serializer::axle::spi::values::Node as W;
    let nodes = v
        .nodes
        .iter()
        .map(|n| match n {
            spi::Node::Null => W::Null,
            spi::Node::Boolean(b) => W::Boolean(*b),
            spi::Node::Signed(i) => W::Signed(*i),
            spi::Node::Unsigned(u) => W::Unsigned(*u),
            spi::Node::Float(f) => W::Float(*f),
            spi::Node::Text(s) => W::Text(s.clone()),
            spi::Node::Binary(b) => W::Binary(b.clone()),
            spi::Node::Array(n) => W::Array(*n),
            spi::Node::Mapping(n) => W::Mapping(*n),
        })
        .collect();
    serializer::axle::spi::values::Value { nodes }
}

/// A value, out of a serializer (moved: strings and bytes are not copied).
pub fn value_out(v: serializer::axle::spi::values::Value) -> spi::Value {
    use serializer::axle::spi::values::Node as W;
    let nodes = v
        .nodes
        .into_iter()
        .map(|n| match n {
            W::Null => spi::Node::Null,
            W::Boolean(b) => spi::Node::Boolean(b),
            W::Signed(i) => spi::Node::Signed(i),
            W::Unsigned(u) => spi::Node::Unsigned(u),
            W::Float(f) => spi::Node::Float(f),
            W::Text(s) => spi::Node::Text(s),
            W::Binary(b) => spi::Node::Binary(b),
            W::Array(n) => spi::Node::Array(n),
            W::Mapping(n) => spi::Node::Mapping(n),
        })
        .collect();
    spi::Value { nodes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_the_round_trip() {
        let v = spi::Value {
            nodes: vec![
                spi::Node::Mapping(1),
                spi::Node::Text("k".into()),
                spi::Node::Array(3),
                spi::Node::Signed(-1),
                spi::Node::Unsigned(u64::MAX),
                spi::Node::Binary(vec![1, 2]),
            ],
        };
        assert_eq!(value_out(value_in(&v)), v);
    }

    #[test]
    fn verdicts_and_admissions() {
        let v = spi::Verdict {
            state: spi::HealthState::Subhealthy,
            weight_permille: 500,
        };
        assert_eq!(
            verdict_out(health_scorer::axle::spi::health::Verdict {
                state: health_scorer::axle::spi::health::HealthState::Subhealthy,
                weight_permille: 500,
            }),
            v
        );
        assert_eq!(admission(7), spi::Admission::Reject { retry_after_ms: 7 });
        assert_eq!(admission(0), spi::Admission::Admit);
    }
}
