use crate::kinds::interceptor::Interceptor;

world_bindings!(
    "axle:spi/interceptor",
    "__axle_export_interceptor",
    "axle_sdk::wasm::interceptor::bindings"
);

use crate::wasm::base::axle::spi::types as wit;
use crate::{InterceptCall, InterceptVerdict};
use bindings::axle::spi::interception as wi;

pub trait Slot {
    type Plugin: Interceptor;
    fn with<R>(f: impl FnOnce(&mut Option<Self::Plugin>) -> R) -> R;
}

axle_spi::intercept_point_conversions!(wi::Point);

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let plugin = S::Plugin::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(plugin));
        Ok(())
    }

    fn declare() -> wi::Declaration {
        let declared = S::with(|slot| slot.as_ref().map(|p| p.declare())).unwrap_or_default();
        let r = declared.reads;
        let mut reads = wi::Reads::empty();
        for (on, flag) in [
            (r.tags, wi::Reads::TAGS),
            (r.consumer, wi::Reads::CONSUMER),
            (r.peer, wi::Reads::PEER),
            (r.trace, wi::Reads::TRACE),
            (r.deadline, wi::Reads::DEADLINE),
            (r.payload_size, wi::Reads::PAYLOAD_SIZE),
            (r.payload, wi::Reads::PAYLOAD),
            (r.outcome, wi::Reads::OUTCOME),
        ] {
            if on {
                reads = reads | flag;
            }
        }
        wi::Declaration {
            points: declared.points.into_iter().map(point_out).collect(),
            reads,
        }
    }

    fn intercept(call: wi::Call) -> wi::Verdict {
        let call = InterceptCall {
            point: point_in(call.point),
            service: call.service,
            method: call.method,
            tags: call.tags,
            consumer_app: call.consumer_app,
            peer: call.peer,
            traceparent: call.traceparent,
            deadline_left_us: call.deadline_left_us,
            payload_size: call.payload_size,
            payload: call.payload,
            outcome: call.outcome,
        };
        match S::with(|slot| slot.as_mut().map(|p| p.intercept(&call))) {
            Some(InterceptVerdict::SetTags(tags)) => wi::Verdict::SetTags(tags),
            Some(InterceptVerdict::Refuse(r)) => wi::Verdict::Refuse(wi::Refusal {
                class: r.class,
                message: r.message,
            }),
            Some(InterceptVerdict::Pass) | None => wi::Verdict::Pass,
        }
    }
}
