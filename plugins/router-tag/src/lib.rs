//! `tag`: a request tagged `key=value` reaches only endpoints carrying the same tag, for
//! every key the router is configured to look at (Dubbo's tag routing, Kitex's tag
//! routing).
//!
//! Config:
//! - `keys` — the tag keys that route (default `["lane"]`).
//! - `force` — when no endpoint matches a request's tag: `false` (default) falls back to
//!   the endpoints that carry no value for that key; `true` leaves no candidate, so the
//!   call fails rather than leaving its lane.
//! - `isolate-untagged` — a request without the key reaches only endpoints without it
//!   (default `false`: it reaches every candidate).

use axle_sdk::{Config, EndpointId, EndpointTable, RouteReads, RouteRequest, Router, TagReads};

/// The tag router.
pub struct TagRouter {
    keys: Vec<String>,
    force: bool,
    isolate_untagged: bool,
}

impl Router for TagRouter {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["keys", "force", "isolate-untagged"])?;
        let mut keys = config.texts("keys")?;
        if config.get("keys").is_none() {
            keys.push("lane".to_string());
        }
        if keys.iter().any(|k| k.is_empty()) {
            return Err("key `keys`: tag keys must not be empty".to_string());
        }
        Ok(TagRouter {
            keys,
            force: config.bool_or("force", false)?,
            isolate_untagged: config.bool_or("isolate-untagged", false)?,
        })
    }

    /// Its tag keys, nothing else: a memo entry per combination of their values.
    fn declare(&self) -> RouteReads {
        RouteReads {
            tags: TagReads::Keys(self.keys.clone()),
            ..RouteReads::default()
        }
    }

    fn route(
        &mut self,
        table: &EndpointTable,
        candidates: &[EndpointId],
        request: &RouteRequest,
    ) -> Vec<EndpointId> {
        let mut left: Vec<EndpointId> = candidates.to_vec();
        for key in &self.keys {
            let tag_of = |id: &EndpointId| table.get(*id).and_then(|e| e.tag(key));
            match request.tag(key) {
                Some(wanted) => {
                    let matching: Vec<_> = left
                        .iter()
                        .copied()
                        .filter(|id| tag_of(id) == Some(wanted))
                        .collect();
                    left = if !matching.is_empty() || self.force {
                        matching
                    } else {
                        left.into_iter().filter(|id| tag_of(id).is_none()).collect()
                    };
                }
                None if self.isolate_untagged => left.retain(|id| tag_of(id).is_none()),
                None => {}
            }
        }
        left
    }
}

axle_sdk::export_router!(TagRouter);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{ConfigValue, Endpoint, RouterRuntime};

    fn table() -> EndpointTable {
        let lanes = [Some("canary"), None, Some("blue"), None];
        EndpointTable::new(
            1,
            lanes
                .iter()
                .enumerate()
                .map(|(i, lane)| Endpoint {
                    id: i as u32,
                    address: String::new(),
                    weight: 100,
                    tags: lane
                        .map(|l| vec![("lane".to_string(), l.to_string())])
                        .unwrap_or_default(),
                })
                .collect(),
        )
    }

    fn request(lane: Option<&str>) -> RouteRequest {
        RouteRequest {
            tags: lane
                .map(|l| vec![("lane".to_string(), l.to_string())])
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    #[test]
    fn matches_falls_back_and_forces() {
        let mut rt = RouterRuntime::<TagRouter>::new(&Config::default()).unwrap();
        rt.endpoints_changed(table());
        let all = [0, 1, 2, 3];
        assert_eq!(rt.route(&all, &request(Some("canary"))), vec![0]);
        assert_eq!(
            rt.route(&all, &request(Some("green"))),
            vec![1, 3],
            "falls back to untagged"
        );
        assert_eq!(rt.route(&all, &request(None)), vec![0, 1, 2, 3]);
        assert_eq!(
            rt.route(&[1, 2], &request(Some("canary"))),
            vec![1],
            "only among candidates"
        );

        let strict = Config::from_pairs([
            ("force", ConfigValue::Flag(true)),
            ("isolate-untagged", ConfigValue::Flag(true)),
        ]);
        let mut rt = RouterRuntime::<TagRouter>::new(&strict).unwrap();
        rt.endpoints_changed(table());
        assert!(rt.route(&all, &request(Some("green"))).is_empty());
        assert_eq!(rt.route(&all, &request(None)), vec![1, 3]);
    }

    #[test]
    fn rejects_bad_config() {
        let bad = Config::from_pairs([("force", ConfigValue::Text("yes".into()))]);
        let err = RouterRuntime::<TagRouter>::new(&bad).err().unwrap();
        assert!(err.contains("`force`"), "{err}");
    }
}
