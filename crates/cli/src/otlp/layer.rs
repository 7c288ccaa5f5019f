//! The `tracing` layer that turns Axle's `call`, `attempt` and `handler` spans into
//! finished OTLP spans. It reads the W3C ids the spans already carry as fields (the ids
//! on the wire), so exported spans join the traces other hops export. The request path
//! pays a field visit per span and a `try_send` at close: a full queue drops the span and
//! counts it, never blocks or grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::mpsc::Sender;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The spans exported, by name, from Axle's own crates (targets `axle_*`).
const EXPORTED: [&str; 3] = ["call", "attempt", "handler"];

/// Whether a callsite is one of Axle's exported spans.
pub(crate) fn wanted(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && EXPORTED.contains(&meta.name()) && meta.target().starts_with("axle_")
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
}

/// A span as it is exported.
#[derive(Clone, Debug)]
pub(crate) struct Finished {
    pub name: &'static str,
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub start: SystemTime,
    pub end: SystemTime,
    /// The span's other fields (`service`, `method`, `endpoint`, `attempt`).
    pub attributes: Vec<(&'static str, Value)>,
    /// The error class, when the call, attempt or handler failed.
    pub error: Option<String>,
}

/// A span being recorded, kept in the registry's extensions until it closes.
struct Open(Finished);

impl Visit for Open {
    fn record_str(&mut self, field: &Field, value: &str) {
        let span = &mut self.0;
        match field.name() {
            "trace_id" => span.trace_id = value.to_string(),
            "span_id" => span.span_id = value.to_string(),
            "parent_span_id" => span.parent_span_id = Some(value.to_string()),
            "error" => span.error = Some(value.to_string()),
            name => span.attributes.push((name, Value::Str(value.to_string()))),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.attributes.push((field.name(), Value::Int(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.0.attributes.push((field.name(), Value::Int(value)));
    }

    /// `display(...)` fields (the ids, the endpoint) arrive here, formatted as text.
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0')
}

/// Records the exported spans and queues each one as it closes.
pub(crate) struct SpanLayer {
    queue: Sender<Finished>,
    dropped: Arc<AtomicU64>,
}

impl SpanLayer {
    pub(crate) fn new(queue: Sender<Finished>, dropped: Arc<AtomicU64>) -> SpanLayer {
        SpanLayer { queue, dropped }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut open = Open(Finished {
            name: attrs.metadata().name(),
            trace_id: String::new(),
            span_id: String::new(),
            parent_span_id: None,
            start: SystemTime::now(),
            end: SystemTime::now(),
            attributes: Vec::new(),
            error: None,
        });
        attrs.record(&mut open);
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions.get_mut::<Open>() {
            values.record(open);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(Open(mut done)) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        if !is_hex(&done.trace_id, 32) || !is_hex(&done.span_id, 16) {
            return;
        }
        // An attempt names no parent: it is the span of the call it runs in.
        if done.parent_span_id.is_none() {
            done.parent_span_id = span.parent().and_then(|parent| {
                let ext = parent.extensions();
                let Open(p) = ext.get::<Open>()?;
                (p.trace_id == done.trace_id).then(|| p.span_id.clone())
            });
        }
        done.parent_span_id = done.parent_span_id.filter(|p| is_hex(p, 16));
        done.end = SystemTime::now();
        if self.queue.try_send(done).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn an_attempt_is_the_child_of_its_call_and_a_full_queue_drops_and_counts() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let dropped = Arc::new(AtomicU64::new(0));
        let layer = SpanLayer::new(tx, dropped.clone())
            .with_filter(tracing_subscriber::filter::filter_fn(|m| m.is_span()));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let trace = "0af7651916cd43dd8448eb211c80319c";
            let call = tracing::info_span!(
                "call",
                service = "echo",
                method = "say",
                trace_id = trace,
                span_id = "b7ad6b7169203331",
                error = tracing::field::Empty
            );
            call.in_scope(|| {
                let attempt = tracing::info_span!(
                    "attempt",
                    service = "echo",
                    attempt = 1u32,
                    trace_id = trace,
                    span_id = "00f067aa0ba902b7",
                    error = tracing::field::Empty
                );
                attempt.record("error", "transport");
            });
            drop(call);
            // The queue holds two: this third span is dropped and counted.
            let _ = tracing::info_span!("handler", trace_id = trace, span_id = "1111111111111111");
        });
        let attempt = rx.try_recv().unwrap();
        assert_eq!(attempt.name, "attempt");
        assert_eq!(attempt.parent_span_id.as_deref(), Some("b7ad6b7169203331"));
        assert_eq!(attempt.error.as_deref(), Some("transport"));
        assert!(attempt.attributes.contains(&("attempt", Value::Int(1))));
        let call = rx.try_recv().unwrap();
        assert_eq!((call.name, call.parent_span_id), ("call", None));
        assert!(call
            .attributes
            .contains(&("method", Value::Str("say".into()))));
        assert!(call.start <= call.end);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn spans_without_valid_ids_are_not_exported() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let layer = SpanLayer::new(tx, Arc::new(AtomicU64::new(0)));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let _ = tracing::info_span!("call", trace_id = "zz", span_id = "b7ad6b7169203331");
            let _ = tracing::info_span!(
                "call",
                trace_id = "0af7651916cd43dd8448eb211c80319c",
                span_id = "0000000000000000"
            );
        });
        assert!(rx.try_recv().is_err());
    }
}
