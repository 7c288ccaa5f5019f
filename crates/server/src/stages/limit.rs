//! The limiter plugin, per key. A key is the method's bounded names (a method no handler
//! serves is `*`) and the consumer identities the limiter's manifest entry says to key on
//! (`key-on`: the caller's IP by default, its application name only if asked, since a
//! caller can name itself anything). A rejection is `rate_limited` with the plugin's
//! retry-after; the handler does not run.
//!
//! A limiter that exports `release` (the `concurrency-limiter` world) gets a [`Permit`]
//! per admission and hears how the request ended when it drops; a plain limiter gets
//! none, so its request path has no callback, no clock read and no reference count.

use std::sync::Arc;
use std::time::Instant;

use crate::stages::protect::MethodGuard;
use crate::stages::shadow_limit;
use crate::{Context, Pipeline};
use axle_plugin_host::kinds::limiter::{Admission, KeyParts, LimiterPlugin};
use axle_wire::{ErrorClass, Frame};

/// What the limiters are owed of a request's end: the live `concurrency-limiter`'s
/// admission and a sampled shadow's (`shadow_limit.rs`). Dropped without
/// [`Permit::ended`] (the caller went away, the request future was cancelled) it reports
/// the request as dropped: each plugin hears of every admission exactly once.
pub struct Permit {
    live: Option<Release>,
    shadow: Option<Release>,
}

impl Permit {
    /// The request ended with `answer`.
    pub fn ended(mut self, answer: &Frame) {
        let dropped = dropped(answer.meta.error_class);
        for release in [&mut self.live, &mut self.shadow].into_iter().flatten() {
            release.report(dropped);
        }
    }
}

/// One limiter's admission, reported once.
struct Release {
    limiter: Arc<LimiterPlugin>,
    key: u32,
    admitted: Instant,
    reported: bool,
}

impl Release {
    fn new(limiter: Arc<LimiterPlugin>, key: u32) -> Self {
        Release {
            limiter,
            key,
            admitted: Instant::now(),
            reported: false,
        }
    }

    fn report(&mut self, dropped: bool) {
        if !std::mem::replace(&mut self.reported, true) {
            let latency_ns = self.admitted.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
            self.limiter.release(self.key, 1, latency_ns, dropped);
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        self.report(true);
    }
}

/// Whether an answer means the request was dropped rather than served: it ran out of
/// time, was refused for load after admission (the concurrency guard, the fuse), or the
/// provider failed. A business error or a bad request was served: the latency is real.
fn dropped(class: Option<ErrorClass>) -> bool {
    matches!(
        class,
        Some(
            ErrorClass::DeadlineExceeded
                | ErrorClass::Overloaded
                | ErrorClass::ShuttingDown
                | ErrorClass::Internal
        )
    )
}

/// `Ok` carries the permit the limiters are owed (none for plain limiters or none at
/// all); `Err` the rejection frame (boxed: it is the rare path). A sampled request is
/// also shown to the shadow limiter, whose answer is only compared.
pub fn admit(
    p: &Pipeline,
    ctx: &Context,
    guard: &MethodGuard,
    id: u64,
    arrived: Instant,
) -> Result<Option<Permit>, Box<Frame>> {
    let parts = || KeyParts {
        service: &guard.service,
        method: &guard.method,
        consumer_app: ctx.scope.consumer_app.as_deref().unwrap_or(""),
        consumer_ip: ctx.peer.ip(),
    };
    // The limiters' clock reads when the request arrived (no reading of their own).
    let at_ns = axle_core::ns_at(arrived);
    let loaded = p.limiter.load();
    let live = loaded.as_ref().map(|limiter| {
        let key = limiter.key_id_of(parts());
        (limiter, key, limiter.acquire_at(key, 1, at_ns).admission)
    });
    let shadow = p.shadow_limiter.sampled().and_then(|shadow| {
        let key = shadow_limit::ask(&shadow, parts(), live.as_ref().map(|l| l.2), at_ns)?;
        Some(Release::new(shadow.plugin.clone(), key))
    });
    match live {
        Some((_, _, Admission::Reject { retry_after_ms })) => {
            guard.stats.limited(false);
            // A shadow that admitted hears the request was dropped (when `shadow` drops).
            drop(shadow);
            let mut frame = Frame::error(id, ErrorClass::RateLimited, "rate limited");
            frame.meta.retry_after_ms = Some(retry_after_ms);
            Err(Box::new(frame))
        }
        Some((limiter, key, Admission::Admit)) => {
            guard.stats.limited(true);
            let live = limiter
                .wants_release()
                .then(|| Release::new(limiter.clone(), key));
            Ok((live.is_some() || shadow.is_some()).then_some(Permit { live, shadow }))
        }
        None => Ok(shadow.map(|s| Permit {
            live: None,
            shadow: Some(s),
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use bytes::Bytes;

    use crate::{Pipeline, Response, ServerBuilder};
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

    /// A handler answering its request.
    fn echo() -> crate::Handler {
        Arc::new(|req| {
            Box::pin(async move {
                Ok(Response {
                    payload: req.payload,
                    content_type: req.content_type,
                })
            })
        })
    }

    /// The pipeline's answer to `request` from one fixed peer, its frame read now.
    fn run(p: &Arc<Pipeline>, request: Frame) -> impl std::future::Future<Output = Frame> {
        let peer = axle_transport::serve::Peer::plain("127.0.0.1:5555".parse().unwrap());
        crate::pipeline::run(p.clone(), request, peer, Instant::now())
    }

    fn request(id: u64, service: &str, method: &str) -> Frame {
        let meta = Metadata {
            service: Some(service.into()),
            method: Some(method.into()),
            ..Metadata::default()
        };
        Frame::request(id, meta, Bytes::from_static(b"hi"))
    }

    /// A server on a free loopback port with `manifest`'s plugins, `handler` serving every
    /// method of `echo`. The cache and the host are returned to live as long as the server.
    async fn serve(
        manifest: &str,
        handler: crate::Handler,
    ) -> (
        tempfile::TempDir,
        axle_plugin_host::PluginHost,
        crate::Server,
    ) {
        let cache = tempfile::tempdir().unwrap();
        let host = axle_plugin_host::PluginHost::new(Some(cache.path().to_path_buf())).unwrap();
        let manifest =
            axle_manifest::Manifest::parse(manifest, "test.toml", std::path::Path::new("/"))
                .unwrap();
        let server = ServerBuilder::new()
            .with_manifest(&host, &manifest)
            .unwrap()
            .any_method("echo", handler)
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        (cache, host, server)
    }

    #[tokio::test]
    async fn a_method_no_handler_serves_is_not_found_and_never_reaches_the_limiter() {
        let (_cache, _host, server) = serve(ONE_PER_KEY, echo()).await;
        let p = &server.pipeline;
        let limiter_calls = || p.limiter.load().as_ref().unwrap().counters().stats.calls;
        let before = limiter_calls();
        // Past the one token `*/*` would have: every one is still `not_found`.
        for i in 0..20 {
            let service = format!("nope{}", i % 3);
            let answer = run(p, request(i, &service, "x")).await;
            assert_eq!(answer.meta.error_class, Some(ErrorClass::NotFound), "{i}");
        }
        assert_eq!(limiter_calls(), before, "the limiter never saw them");
        // A served method meets the limiter: its one token, then a rejection.
        let ok = run(p, request(100, "echo", "a")).await;
        assert_eq!(ok.meta.error_class, None);
        let limited = run(p, request(101, "echo", "b")).await;
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

    /// Plugin `two`: a concurrency limiter of exactly two requests in flight per method.
    macro_rules! two_in_flight_plugin {
        () => {
            "\
[plugins.two]
kind = \"limiter\"
component = \"builtin:adaptive-concurrency\"
timeout-ms = 1000
key-on = []
[plugins.two.config]
initial-limit = 2
max-limit = 2
"
        };
    }

    /// `two` as the live limiter.
    const TWO_IN_FLIGHT: &str = concat!(two_in_flight_plugin!(), "[slots]\nlimiter = \"two\"\n");

    #[tokio::test]
    async fn a_concurrency_limiter_hears_each_admitted_request_end() {
        // The handler holds every request until the test lets it go.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let entered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (g, e) = (gate.clone(), entered.clone());
        let (_cache, _host, server) = serve(
            TWO_IN_FLIGHT,
            Arc::new(move |req| {
                let (g, e) = (g.clone(), e.clone());
                Box::pin(async move {
                    e.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _permit = g.acquire().await;
                    Ok(Response {
                        payload: req.payload,
                        content_type: req.content_type,
                    })
                })
            }),
        )
        .await;
        let p = &server.pipeline;
        let limiter = p.limiter.load().as_ref().unwrap().clone();
        assert!(limiter.wants_release());
        let held = async {
            // Both admitted requests are in the handler: a third finds the limit full.
            for _ in 0..10_000 {
                if entered.load(std::sync::atomic::Ordering::SeqCst) == 2 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert_eq!(entered.load(std::sync::atomic::Ordering::SeqCst), 2);
            let third = run(p, request(3, "echo", "a")).await;
            assert_eq!(third.meta.error_class, Some(ErrorClass::RateLimited));
            gate.add_permits(1000);
        };
        let (a, b, ()) = futures::join!(
            run(p, request(1, "echo", "a")),
            run(p, request(2, "echo", "a")),
            held
        );
        assert_eq!((a.meta.error_class, b.meta.error_class), (None, None));
        // Released: the limit has room again, request after request.
        for i in 10..20 {
            let ok = run(p, request(i, "echo", "a")).await;
            assert_eq!(ok.meta.error_class, None, "request {i}");
        }
        // 2 + 1 + 10 acquires, 12 releases, and the one key's definition.
        assert_eq!(limiter.counters().stats.calls, 13 + 12 + 1);
        server.shutdown(std::time::Duration::ZERO).await;
    }

    /// No live limiter; `two` as a shadow limiter, asked every time.
    const SHADOW_TWO: &str = concat!(
        two_in_flight_plugin!(),
        "[slots]\nshadow-limiter = \"two\"\nshadow-sample = 1.0\n"
    );

    #[tokio::test]
    async fn a_shadow_limiter_hears_each_end_never_decides_and_swaps_out() {
        let (_cache, host, server) = serve(SHADOW_TWO, echo()).await;
        let p = &server.pipeline;
        for i in 0..10 {
            let ok = run(p, request(i, "echo", "a")).await;
            assert_eq!(ok.meta.error_class, None, "request {i}");
        }
        // Had the shadow not heard each end, its limit of two would have been full from
        // the third request on: every one would diverge.
        let view = p.shadow_limiter.view().expect("a shadow");
        assert_eq!((view.sampled, view.agreed, view.diverged), (10, 10, 0));
        assert_eq!((view.live.as_str(), view.candidate.as_str()), ("", "two"));
        let without = axle_manifest::Manifest::parse(
            &SHADOW_TWO.replace("shadow-limiter = \"two\"\n", ""),
            "t.toml",
            std::path::Path::new("/"),
        )
        .unwrap();
        server.limiter_slot().swap(&host, &without).unwrap();
        assert!(p.shadow_limiter.view().is_none());
        server.shutdown(std::time::Duration::ZERO).await;
    }
}
