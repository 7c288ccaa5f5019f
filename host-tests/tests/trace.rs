//! W3C trace context across hops (issue 16): a call starts a trace, the provider's
//! handler sees it in its context (`Context::traceparent`), and a call made within the
//! handler (`CallOptions::within(&ctx)`) continues it at the next hop; a caller handing a
//! `traceparent` in (as the gateway does from the HTTP header) has it continued.

use axle::client::{CallOptions, Client, ClientConfig};
use axle::core::TraceContext;
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::server::{Context, ServerBuilder, Status};
use axle_host_tests::rt;
use serde_json::{json, Value};

fn client(host: &PluginHost, service: &str, addr: &str) -> Client {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    Client::new(
        host,
        ClientConfig::new(m).endpoints(service, [EndpointSpec::new(addr)]),
    )
    .unwrap()
}

/// The handler's trace context, parsed back from its text form.
fn parsed(v: &Value) -> TraceContext {
    let text = v.as_str().unwrap_or_else(|| panic!("a traceparent: {v}"));
    TraceContext::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_trace_starts_at_the_caller_and_continues_through_a_handler_to_the_next_hop() {
    rt().block_on(async {
        let host = PluginHost::with_default_cache().unwrap();
        let manifest = Manifest::embedded().unwrap();
        let leaf_server = ServerBuilder::new()
            .with_manifest(&host, &manifest)
            .unwrap()
            .typed("trace", "leaf", |_: Value, ctx: Context| async move {
                Ok(json!({ "traceparent": ctx.traceparent() }))
            })
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        let to_leaf = client(&host, "trace", &leaf_server.local_addr().to_string());
        let middle = ServerBuilder::new()
            .with_manifest(&host, &manifest)
            .unwrap()
            .typed("hop", "via", move |_: Value, ctx: Context| {
                let to_leaf = to_leaf.clone();
                async move {
                    let leaf: Value = to_leaf
                        .call("trace", "leaf", &json!({}), &CallOptions::within(&ctx))
                        .await
                        .map_err(|e| Status::business(e.to_string()))?;
                    Ok(json!({ "mine": ctx.traceparent(), "leaf": leaf["traceparent"] }))
                }
            })
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        let edge = client(&host, "hop", &middle.local_addr().to_string());

        // No trace handed in: the call starts one, carried on at the next hop.
        let first: Value = edge
            .call("hop", "via", &json!({}), &CallOptions::default())
            .await
            .unwrap();
        let (mine, leaf) = (parsed(&first["mine"]), parsed(&first["leaf"]));
        assert_eq!(
            mine.trace_id, leaf.trace_id,
            "one trace across hops: {first}"
        );
        assert_ne!(mine.span_id, leaf.span_id, "each handler has its own span");
        assert_eq!(mine.flags & 1, 1, "a new trace is sampled");
        let second: Value = edge
            .call("hop", "via", &json!({}), &CallOptions::default())
            .await
            .unwrap();
        assert_ne!(
            parsed(&second["mine"]).trace_id,
            mine.trace_id,
            "each call without one starts its own trace"
        );

        // A trace handed in (the gateway's `traceparent` header) is continued.
        let incoming =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let options = CallOptions {
            trace: Some(incoming),
            ..CallOptions::default()
        };
        let third: Value = edge.call("hop", "via", &json!({}), &options).await.unwrap();
        for hop in ["mine", "leaf"] {
            let t = parsed(&third[hop]);
            assert_eq!(t.trace_id, incoming.trace_id, "{hop}: {third}");
            assert_ne!(t.span_id, incoming.span_id, "{hop}: a span of its own");
            assert_eq!(t.flags, 0, "{hop}: the caller's flags travel");
        }
        middle.shutdown(std::time::Duration::from_millis(100)).await;
        leaf_server
            .shutdown(std::time::Duration::from_millis(100))
            .await;
    });
}
