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
        Admission::Admit => {
            guard.stats.limited(true);
            Ok(())
        }
        Admission::Reject { retry_after_ms } => {
            guard.stats.limited(false);
            let mut frame = Frame::error(id, ErrorClass::RateLimited, "rate limited");
            frame.meta.retry_after_ms = Some(retry_after_ms);
            Err(Box::new(frame))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::{Response, ServerBuilder};
    use axle_wire::{ErrorClass, Frame, Metadata};

    /// A limiter that admits one request per key, then (for a thousand seconds) none.
    const ONE_PER_KEY: &str = "\
[plugins.one]
kind = \"limiter\"
component = \"builtin:token-bucket\"
timeout-ms = 1000
[plugins.one.config]
rate = 0.001
burst = 1
[slots]
limiter = \"one\"
";

    fn request(id: u64, service: &str, method: &str) -> Frame {
        let meta = Metadata {
            service: Some(service.into()),
            method: Some(method.into()),
            ..Metadata::default()
        };
        Frame::request(id, meta, Bytes::from_static(b"hi"))
    }

    #[tokio::test]
    async fn a_method_no_handler_serves_is_not_found_and_never_reaches_the_limiter() {
        let cache = tempfile::tempdir().unwrap();
        let host = axle_plugin_host::PluginHost::new(Some(cache.path().to_path_buf())).unwrap();
        let manifest =
            axle_manifest::Manifest::parse(ONE_PER_KEY, "test.toml", std::path::Path::new("/"))
                .unwrap();
        let server = ServerBuilder::new()
            .with_manifest(&host, &manifest)
            .unwrap()
            .any_method(
                "echo",
                Arc::new(|req| {
                    Box::pin(async move {
                        Ok(Response {
                            payload: req.payload,
                            content_type: req.content_type,
                        })
                    })
                }),
            )
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        let p = &server.pipeline;
        let limiter_calls = || p.limiter.load().as_ref().unwrap().counters().stats.calls;
        let peer = axle_transport::serve::Peer::plain("127.0.0.1:5555".parse().unwrap());
        let before = limiter_calls();
        // Past the one token `*/*` would have: every one is still `not_found`.
        for i in 0..20 {
            let service = format!("nope{}", i % 3);
            let answer = crate::pipeline::run(p, request(i, &service, "x"), &peer).await;
            assert_eq!(answer.meta.error_class, Some(ErrorClass::NotFound), "{i}");
        }
        assert_eq!(limiter_calls(), before, "the limiter never saw them");
        // A served method meets the limiter: its one token, then a rejection.
        let ok = crate::pipeline::run(p, request(100, "echo", "a"), &peer).await;
        assert_eq!(ok.meta.error_class, None);
        let limited = crate::pipeline::run(p, request(101, "echo", "b"), &peer).await;
        assert_eq!(limited.meta.error_class, Some(ErrorClass::RateLimited));
        assert!(limiter_calls() > before);

        let views = server.stats().methods;
        let rows: Vec<(&str, &str, u64, u64)> = views
            .iter()
            .map(|v| (v.service.as_str(), v.method.as_str(), v.requests, v.handled))
            .collect();
        assert_eq!(rows, [("*", "*", 20, 0), ("echo", "*", 2, 1)]);
        server.shutdown(std::time::Duration::ZERO).await;
    }
}
