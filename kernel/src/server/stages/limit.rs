//! The limiter plugin, per key (service, method, consumer app, consumer IP). A rejection
//! is `rate_limited` with the plugin's retry-after; the handler does not run.

use crate::plugin::kinds::limiter::{Admission, LimitKey};
use crate::server::{Context, Pipeline};
use crate::wire::{ErrorClass, Frame};

/// `Err` carries the rejection frame.
pub fn admit(p: &Pipeline, ctx: &Context, id: u64) -> Result<(), Frame> {
    let Some(limiter) = &p.limiter else {
        return Ok(());
    };
    let key = limiter.key_id(&LimitKey {
        service: ctx.service.clone(),
        method: ctx.method.clone(),
        consumer_app: ctx.consumer_app.clone().unwrap_or_default(),
        consumer_ip: ctx.peer.ip().to_string(),
    });
    match limiter.acquire(key, 1).admission {
        Admission::Admit => Ok(()),
        Admission::Reject(retry_after_ms) => {
            let mut frame = Frame::error(id, ErrorClass::RateLimited, "rate limited");
            frame.meta.retry_after_ms = Some(retry_after_ms);
            Err(frame)
        }
    }
}
