//! The limiter plugin, per key. A key is the method's bounded names (a method no handler
//! serves is `*`) and the consumer identities the limiter's manifest entry says to key on
//! (`key-on`: the caller's IP by default, its application name only if asked, since a
//! caller can name itself anything). A rejection is `rate_limited` with the plugin's
//! retry-after; the handler does not run.

use crate::stages::protect::MethodGuard;
use crate::{Context, Pipeline};
use axle_plugin_host::kinds::limiter::{Admission, KeyParts};
use axle_wire::{ErrorClass, Frame};

/// `Err` carries the rejection frame (boxed: it is the rare path).
pub fn admit(p: &Pipeline, ctx: &Context, guard: &MethodGuard, id: u64) -> Result<(), Box<Frame>> {
    let loaded = p.limiter.load();
    let Some(limiter) = loaded.as_ref() else {
        return Ok(());
    };
    let key = limiter.key_id_of(KeyParts {
        service: &guard.service,
        method: &guard.method,
        consumer_app: ctx.scope.consumer_app.as_deref().unwrap_or(""),
        consumer_ip: ctx.peer.ip(),
    });
    match limiter.acquire(key, 1).admission {
        Admission::Admit => Ok(()),
        Admission::Reject { retry_after_ms } => {
            let mut frame = Frame::error(id, ErrorClass::RateLimited, "rate limited");
            frame.meta.retry_after_ms = Some(retry_after_ms);
            Err(Box::new(frame))
        }
    }
}
