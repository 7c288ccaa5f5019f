use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

use super::*;
use axle_transport::connection::Connection;
use axle_transport::Keepalive;
use axle_wire::{ErrorClass, Limits, Metadata};

const WAIT: Duration = Duration::from_secs(10);

async fn call(addr: &str, service: &str, method: &str) {
    let conn = Connection::connect(addr, Limits::default(), Keepalive::default(), None)
        .await
        .unwrap();
    let meta = Metadata {
        service: Some(service.into()),
        method: Some(method.into()),
        ..Metadata::default()
    };
    conn.call(0, meta, Bytes::from_static(b"hi"), Instant::now() + WAIT)
        .await
        .unwrap();
    conn.close();
}

#[tokio::test]
async fn stats_counts_what_the_server_answered() {
    let server = ServerBuilder::new()
        .any_method(
            "echo",
            std::sync::Arc::new(|req| {
                Box::pin(async move {
                    Ok(axle_server::Response {
                        payload: req.payload,
                        content_type: req.content_type,
                    })
                })
            }),
        )
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let admin = Admin::new()
        .server("provider", &server)
        .method("twice", |_, body: Value| async move {
            Ok(json!([body.clone(), body]))
        })
        .bind("127.0.0.1:0", Exposure::LoopbackOnly)
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    for _ in 0..7 {
        call(&addr, "echo", "ping").await;
    }
    call(&addr, "nope", "x").await;

    let admin_addr = admin.local_addr().to_string();
    let report: StatsReport = serde_json::from_value(
        request(&admin_addr, "stats", &Value::Null, WAIT)
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(report.clients.is_empty());
    let [s] = &report.servers[..] else {
        panic!("{report:?}")
    };
    assert_eq!(s.name, "provider");
    assert_eq!(s.view.address, addr);
    // A name the catch-all serves and no manifest declares: the service's shared row.
    let ping = s
        .view
        .methods
        .iter()
        .find(|m| m.service == "echo" && m.method == "*")
        .unwrap();
    assert_eq!((ping.requests, ping.handled, ping.ok), (7, 7, 7));
    assert_eq!(ping.error_count(), 0);
    assert!(ping.max_concurrency_seen >= 1);
    // Names no handler serves are the caller's to invent: counted together.
    let nope = s.view.methods.iter().find(|m| m.service == "*").unwrap();
    assert_eq!((nope.requests, nope.handled), (1, 0));
    assert_eq!(nope.errors.get("not_found"), Some(&1));

    // Methods added by others are served like the built-in ones.
    let twice = request(&admin_addr, "twice", &json!({"a": 1}), WAIT)
        .await
        .unwrap();
    assert_eq!(twice, json!([{"a": 1}, {"a": 1}]));
    let names = request(&admin_addr, "methods", &Value::Null, WAIT)
        .await
        .unwrap();
    assert_eq!(
        names,
        json!(["events", "methods", "plugins", "stats", "twice"])
    );
    match request(&admin_addr, "swap", &Value::Null, WAIT).await {
        Err(AdminError::Remote { class, .. }) => assert_eq!(class, ErrorClass::NotFound),
        other => panic!("{other:?}"),
    }
    admin.shutdown(Duration::from_millis(100)).await;
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn refuses_to_listen_beyond_loopback_unless_told() {
    let err = Admin::new()
        .bind("0.0.0.0:0", Exposure::LoopbackOnly)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, AdminError::NotLoopback { .. }), "{err}");
}
