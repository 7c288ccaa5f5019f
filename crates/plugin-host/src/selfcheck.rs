//! A plugin's self-check: one real call through each hot function with a small fixed
//! input, answered by the plugin itself (not by the safe default). Run by `axle plugins
//! check` and before a plugin goes live.

use axle_spi::{
    Endpoint, EndpointTable, HealthState, LimitKey, Node, RouteRequest, Value, Verdict, WindowStats,
};

use super::{LoadedPlugin, Plugin};

/// A small endpoint table with ids `0..n`, lane tags on even ids.
pub fn sample_table(version: u64, n: u32) -> EndpointTable {
    EndpointTable::new(
        version,
        (0..n)
            .map(|id| Endpoint {
                id,
                address: format!("127.0.0.1:{}", 20_000 + id),
                weight: 100 + (id % 3) * 50,
                tags: if id % 2 == 0 {
                    vec![("lane".into(), "canary".into())]
                } else {
                    Vec::new()
                },
            })
            .collect(),
    )
}

/// Runs the self-check; `Err` says what the plugin got wrong.
pub fn run(loaded: &LoadedPlugin) -> Result<(), String> {
    let before = loaded.stats.snapshot();
    let result = match &loaded.plugin {
        Plugin::Selector(p) => {
            p.endpoints_changed(&sample_table(1, 3));
            p.define_set(0, vec![0, 1, 2]);
            match p.select(0, 7) {
                Some(s) if s.by_plugin || s.endpoint < 3 => Ok(()),
                other => Err(format!("select answered {other:?}")),
            }
        }
        Plugin::Router(p) => {
            p.endpoints_changed(&sample_table(1, 4));
            let request = RouteRequest {
                service: "selfcheck".into(),
                method: "ping".into(),
                tags: vec![("lane".into(), "canary".into())],
                consumer_app: "selfcheck".into(),
                caller_address: "127.0.0.1".into(),
                fields: p
                    .reads()
                    .fields
                    .iter()
                    .map(|f| (f.clone(), "1".into()))
                    .collect(),
            };
            let routed = p.route(&[0, 1, 2, 3], &request);
            if routed.endpoints.iter().all(|id| *id < 4) {
                Ok(())
            } else {
                Err(format!("route answered {:?}", routed.endpoints))
            }
        }
        Plugin::Serializer(p) => {
            let value = Value {
                nodes: vec![
                    Node::Mapping(2),
                    Node::Text("id".into()),
                    Node::Signed(42),
                    Node::Text("tags".into()),
                    Node::Array(1),
                    Node::Text("x".into()),
                ],
            };
            let bytes = p.encode(&value).map_err(|e| format!("encode: {e}"))?;
            let back = p.decode(&bytes).map_err(|e| format!("decode: {e}"))?;
            if back == value {
                Ok(())
            } else {
                Err(format!("a value did not survive encode + decode: {back:?}"))
            }
        }
        Plugin::HealthScorer(p) => {
            let previous = Verdict {
                state: HealthState::Healthy,
                weight_permille: 1000,
            };
            let stats = WindowStats {
                endpoint: 0,
                window_ms: 10_000,
                total: 100,
                timeouts: 0,
                failures: 0,
                rejected: 0,
                consecutive_failures: 0,
                heartbeat_failures: 0,
                ewma_latency_ns: 1_000_000,
                previous: HealthState::Healthy,
            };
            let _ = p.score(&stats, previous);
            Ok(())
        }
        Plugin::Limiter(p) => {
            let key = p.key_id(&LimitKey {
                service: "selfcheck".into(),
                method: "ping".into(),
                consumer_app: String::new(),
                consumer_ip: "127.0.0.1".into(),
            });
            match p.acquire(key, 1) {
                answer if answer.by_plugin => Ok(()),
                answer => Err(format!(
                    "acquire was answered by on-error ({:?})",
                    answer.admission
                )),
            }
        }
        Plugin::Interceptor(p) => {
            use crate::kinds::interceptor::CallView;
            let tags = [("lane".to_string(), "canary".to_string())];
            p.declaration().points.into_iter().try_for_each(|point| {
                let call = CallView {
                    tags: &tags,
                    consumer_app: "selfcheck",
                    peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
                    ..CallView::new(point, "selfcheck", "ping")
                };
                match p.intercept(&call) {
                    answer if answer.by_plugin => Ok(()),
                    answer => Err(format!(
                        "intercept at {} was answered by the safe default ({:?})",
                        point.name(),
                        answer.verdict
                    )),
                }
            })
        }
    };
    result?;
    let after = loaded.stats.snapshot();
    if after.faults() > before.faults() {
        return Err(format!(
            "the plugin faulted during the self-check (timeouts {}, traps {}, memory {}, invalid answers {})",
            after.timeouts - before.timeouts,
            after.traps - before.traps,
            after.memory - before.memory,
            after.invalid - before.invalid
        ));
    }
    Ok(())
}
