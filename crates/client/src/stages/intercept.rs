//! INTERCEPT, on the caller: the service's `client-interceptors`, in manifest order, at
//! two points of a call. `client-before` runs once per call before anything else (cache,
//! route): an interceptor may pass, set the tags the call then routes with and sends (the
//! next interceptor sees them), or refuse — the call fails with
//! [`CallError::Intercepted`] and nothing is sent. `client-after` runs once the call has
//! its final answer (after retries, before any fallback): a refusal there replaces the
//! answer. A refusal ends the chain: the interceptors after it are not asked.
//!
//! A service without interceptors pays one emptiness check per point: nothing is
//! allocated, nothing locked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axle_plugin_host::kinds::interceptor::{
    CallView, InterceptPoint, InterceptVerdict, InterceptorPlugin,
};
use axle_wire::ErrorClass;

use crate::state::ServiceState;
use crate::{CallError, CallOptions, Reply};

/// The parts of a call both points show an interceptor.
pub struct Seen<'a> {
    pub svc: &'a ServiceState,
    pub method: &'a str,
    pub body: &'a [u8],
    pub options: &'a CallOptions,
}

impl Seen<'_> {
    fn view<'v>(
        &'v self,
        point: InterceptPoint,
        tags: &'v [(String, String)],
        traceparent: &'v str,
        left: Duration,
        outcome: &'v str,
    ) -> CallView<'v> {
        CallView {
            tags,
            consumer_app: self
                .options
                .consumer_app
                .as_deref()
                .or(self.svc.consumer_app.as_deref())
                .unwrap_or(""),
            traceparent,
            deadline_left_us: left.as_micros().min(u128::from(u64::MAX)) as u64,
            payload: self.body,
            outcome,
            ..CallView::new(point, &self.svc.name, self.method)
        }
    }

    fn traceparent(&self, chain: &[Arc<InterceptorPlugin>]) -> String {
        match &self.options.trace {
            Some(t) if chain.iter().any(|i| i.declaration().reads.trace) => t.traceparent(),
            _ => String::new(),
        }
    }
}

/// `client-before`: `Ok(Some(tags))` when the chain changed the call's tags, `Ok(None)`
/// when it passed it unchanged, `Err` when an interceptor refused it.
pub fn before(
    chain: &[Arc<InterceptorPlugin>],
    seen: &Seen<'_>,
    deadline: Instant,
) -> Result<Option<Vec<(String, String)>>, CallError> {
    if chain.is_empty() {
        return Ok(None);
    }
    let point = InterceptPoint::ClientBefore;
    let traceparent = seen.traceparent(chain);
    let mut changed: Option<Vec<(String, String)>> = None;
    for interceptor in chain.iter().filter(|i| i.runs_at(point)) {
        let tags = changed.as_deref().unwrap_or(&seen.options.tags);
        let left = deadline.saturating_duration_since(Instant::now());
        let view = seen.view(point, tags, &traceparent, left, "");
        match interceptor.intercept(&view).verdict {
            InterceptVerdict::Pass => {}
            InterceptVerdict::SetTags(tags) => changed = Some(tags),
            InterceptVerdict::Refuse(r) => return Err(refused(interceptor, r)),
        }
    }
    Ok(changed)
}

/// `client-after`: the final answer, or the refusal that replaces it.
pub fn after(
    chain: &[Arc<InterceptorPlugin>],
    seen: &Seen<'_>,
    deadline: Instant,
    result: Result<Reply, CallError>,
) -> Result<Reply, CallError> {
    if chain.is_empty() {
        return result;
    }
    let point = InterceptPoint::ClientAfter;
    let traceparent = seen.traceparent(chain);
    let outcome = match &result {
        Ok(_) => "",
        Err(e) => e.class(),
    };
    for interceptor in chain.iter().filter(|i| i.runs_at(point)) {
        let left = deadline.saturating_duration_since(Instant::now());
        let view = seen.view(point, &seen.options.tags, &traceparent, left, outcome);
        match interceptor.intercept(&view).verdict {
            InterceptVerdict::Refuse(r) => return Err(refused(interceptor, r)),
            // The host refuses set-tags at an after point as an invalid answer.
            InterceptVerdict::Pass | InterceptVerdict::SetTags(_) => {}
        }
    }
    result
}

fn refused(
    interceptor: &InterceptorPlugin,
    r: axle_plugin_host::kinds::interceptor::Refusal,
) -> CallError {
    CallError::Intercepted {
        interceptor: interceptor.name().to_string(),
        class: class_of(&r.class),
        message: r.message,
    }
}

/// The wire class a refusal names (the host only lets through the classes an
/// interceptor may claim; anything else would read as `internal`).
fn class_of(name: &str) -> ErrorClass {
    ErrorClass::ALL
        .into_iter()
        .find(|c| c.as_str() == name)
        .unwrap_or(ErrorClass::Internal)
}

#[cfg(test)]
mod tests {
    use super::class_of;
    use axle_plugin_host::kinds::interceptor::REFUSAL_CLASSES;
    use axle_wire::ErrorClass;

    #[test]
    fn every_class_a_refusal_may_name_is_a_wire_class() {
        for name in REFUSAL_CLASSES {
            assert_eq!(class_of(name).as_str(), name);
        }
        assert_eq!(class_of("teapot"), ErrorClass::Internal);
    }
}
