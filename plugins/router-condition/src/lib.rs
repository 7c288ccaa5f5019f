//! `condition`: Dubbo-style condition routing. Each rule is `WHEN => THEN`: a request the
//! WHEN side matches may reach only the candidates the THEN side matches (`rule.rs` has the
//! grammar, `pattern.rs` the values). One plugin covers gray release by caller application
//! or address, parameter routing (a request field picks a tag or group) and version
//! routing:
//!
//! ```toml
//! rules = [
//!   "app = billing & method = get* => lane = canary",   # gray release by application
//!   "address = 10.0.0.0/8 => zone = eu-1",              # ... by caller address
//!   "field:user.tier = gold => group = gold",           # parameter routing
//!   "field:order.amount = 1000..* => lane = big",
//!   "=> version = 2.*",                                 # version routing (every request)
//! ]
//! ```
//!
//! Rules are tried in order; the first whose WHEN matches and whose THEN leaves at least
//! one candidate decides. A matching rule whose THEN leaves none is skipped, unless
//! `force = true` (then the request gets no endpoint and fails, rather than leave its
//! route). When no rule decides, every candidate stays. An empty THEN blocks on purpose.
//!
//! Config: `rules` (texts, required), `force` (default `false`). Rules are parsed and
//! validated in `init`; an error names the rule and the byte where it went wrong. The
//! router declares exactly the request parts its rules read (tag keys, app, address,
//! method, fields), so the kernel fills and memoises on those alone.

mod pattern;
mod rule;

use axle_sdk::{Config, EndpointId, EndpointTable, RouteReads, RouteRequest, Router, TagReads};
use rule::{Part, Rule, Target};

/// The condition router.
pub struct ConditionRouter {
    rules: Vec<Rule>,
    force: bool,
    reads: RouteReads,
}

/// Most rules one router takes (each is tried once per request shape).
const MAX_RULES: usize = 256;

impl Router for ConditionRouter {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["rules", "force"])?;
        let texts = config.texts("rules")?;
        if texts.is_empty() {
            return Err("key `rules`: at least one rule (`WHEN => THEN`)".into());
        }
        if texts.len() > MAX_RULES {
            return Err(format!(
                "key `rules`: {} rules, at most {MAX_RULES}",
                texts.len()
            ));
        }
        let rules = texts
            .iter()
            .enumerate()
            .map(|(i, text)| rule::parse(i + 1, text))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("key `rules`: {e}"))?;
        Ok(ConditionRouter {
            reads: reads_of(&rules),
            rules,
            force: config.bool_or("force", false)?,
        })
    }

    fn declare(&self) -> RouteReads {
        self.reads.clone()
    }

    fn route(
        &mut self,
        table: &EndpointTable,
        candidates: &[EndpointId],
        request: &RouteRequest,
    ) -> Vec<EndpointId> {
        for rule in &self.rules {
            if !rule.when.iter().all(|c| c.holds(part(request, &c.key))) {
                continue;
            }
            let kept: Vec<EndpointId> = candidates
                .iter()
                .copied()
                .filter(|id| {
                    let Some(e) = table.get(*id) else {
                        return false;
                    };
                    // An empty THEN keeps nothing (a block); `all` of none would keep all.
                    !rule.then.is_empty()
                        && rule.then.iter().all(|c| {
                            c.holds(match &c.key {
                                Target::Address => Some(e.address.as_str()),
                                Target::Tag(k) => e.tag(k),
                            })
                        })
                })
                .collect();
            if !kept.is_empty() || self.force || rule.then.is_empty() {
                return kept;
            }
        }
        candidates.to_vec()
    }
}

/// The request's value of a WHEN part (`None`: the request does not have it).
fn part<'a>(request: &'a RouteRequest, key: &Part) -> Option<&'a str> {
    let non_empty = |s: &'a str| (!s.is_empty()).then_some(s);
    match key {
        Part::Method => non_empty(&request.method),
        Part::App => non_empty(&request.consumer_app),
        Part::Address => non_empty(&request.caller_address),
        Part::Tag(k) => request.tag(k),
        Part::Field(path) => request.field(path),
    }
}

/// Exactly the request parts the rules' WHEN sides use.
fn reads_of(rules: &[Rule]) -> RouteReads {
    let mut reads = RouteReads::default();
    let mut keys: Vec<String> = Vec::new();
    for c in rules.iter().flat_map(|r| &r.when) {
        match &c.key {
            Part::Method => reads.method = true,
            Part::App => reads.consumer_app = true,
            Part::Address => reads.caller_address = true,
            Part::Tag(k) if !keys.contains(k) => keys.push(k.clone()),
            Part::Field(p) if !reads.fields.contains(p) => reads.fields.push(p.clone()),
            Part::Tag(_) | Part::Field(_) => {}
        }
    }
    if !keys.is_empty() {
        reads.tags = TagReads::Keys(keys);
    }
    reads
}

axle_sdk::export_router!(ConditionRouter);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{ConfigValue, Endpoint, RouterRuntime};

    /// 0: lane=canary zone=eu-1 version=2.1; 1: zone=us version=1.9; 2: group=gold
    /// version=2.0 at 10.1.0.3; 3: lane=big version=1.0.
    fn table() -> EndpointTable {
        let tags: [&[(&str, &str)]; 4] = [
            &[("lane", "canary"), ("zone", "eu-1"), ("version", "2.1")],
            &[("zone", "us"), ("version", "1.9")],
            &[("group", "gold"), ("version", "2.0")],
            &[("lane", "big"), ("version", "1.0")],
        ];
        EndpointTable::new(
            1,
            tags.iter()
                .enumerate()
                .map(|(i, t)| Endpoint {
                    id: i as u32,
                    address: format!("10.{i}.0.3:7300"),
                    weight: 100,
                    tags: t
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                })
                .collect(),
        )
    }

    fn router(rules: &[&str], force: bool) -> Result<RouterRuntime<ConditionRouter>, String> {
        let config = Config::from_pairs([
            (
                "rules",
                ConfigValue::Texts(rules.iter().map(|s| s.to_string()).collect()),
            ),
            ("force", ConfigValue::Flag(force)),
        ]);
        let mut rt = RouterRuntime::<ConditionRouter>::new(&config)?;
        rt.endpoints_changed(table());
        Ok(rt)
    }

    const ALL: [u32; 4] = [0, 1, 2, 3];

    #[test]
    fn gray_release_by_app_and_method() {
        let mut rt = router(&["app = billing & method = get* => lane = canary"], false).unwrap();
        let req = |app: &str, method: &str| RouteRequest {
            consumer_app: app.into(),
            method: method.into(),
            ..RouteRequest::default()
        };
        assert_eq!(rt.route(&ALL, &req("billing", "getUser")), [0]);
        assert_eq!(rt.route(&ALL, &req("billing", "put")), ALL);
        assert_eq!(rt.route(&ALL, &req("web", "getUser")), ALL);
        let reads = rt.declare();
        assert!(reads.consumer_app && reads.method && !reads.caller_address);
        assert_eq!(reads.tags, TagReads::None);
    }

    #[test]
    fn caller_address_fields_and_versions() {
        let mut rt = router(
            &[
                "address = 192.168.0.0/16 => zone = eu-1",
                "field:user.tier = gold => group = gold",
                "field:order.amount = 1000..* => lane = big",
                "=> version = 2.*",
            ],
            false,
        )
        .unwrap();
        let req = |address: &str, fields: &[(&str, &str)]| RouteRequest {
            caller_address: address.into(),
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..RouteRequest::default()
        };
        assert_eq!(rt.route(&ALL, &req("192.168.4.2", &[])), [0]);
        assert_eq!(
            rt.route(&ALL, &req("10.0.0.1", &[("user.tier", "gold")])),
            [2]
        );
        assert_eq!(
            rt.route(&ALL, &req("10.0.0.1", &[("order.amount", "1500")])),
            [3]
        );
        assert_eq!(
            rt.route(&ALL, &req("10.0.0.1", &[("order.amount", "20")])),
            [0, 2],
            "the version rule catches the rest"
        );
        assert_eq!(
            rt.route(&[1, 3], &req("", &[])),
            [1, 3],
            "no rule decides: all stay"
        );
        let reads = rt.declare();
        assert!(reads.caller_address && !reads.method && !reads.consumer_app);
        assert_eq!(reads.fields, ["user.tier", "order.amount"]);
    }

    #[test]
    fn force_and_blocks() {
        let rules = ["tag:lane = gray => lane = gray", "app = evil =>"];
        let req = |lane: &str, app: &str| RouteRequest {
            tags: vec![("lane".into(), lane.into())],
            consumer_app: app.into(),
            ..RouteRequest::default()
        };
        let mut soft = router(&rules, false).unwrap();
        assert_eq!(
            soft.route(&ALL, &req("gray", "")),
            ALL,
            "nothing gray: falls back"
        );
        assert!(
            soft.route(&ALL, &req("x", "evil")).is_empty(),
            "an empty THEN blocks"
        );
        let mut hard = router(&rules, true).unwrap();
        assert!(hard.route(&ALL, &req("gray", "")).is_empty());
        assert_eq!(hard.declare().tags, TagReads::Keys(vec!["lane".into()]));
        let by_address = router(&["=> address = 10.2.0.0/16"], false)
            .unwrap()
            .route(&ALL, &req("", ""));
        assert_eq!(by_address, [2]);
    }

    #[test]
    fn bad_config_is_refused_with_the_rule() {
        let e = router(&["app = a => lane = x", "nonsense"], false)
            .err()
            .unwrap();
        assert!(e.starts_with("key `rules`: rule 2 (`nonsense`)"), "{e}");
        assert!(router(&[], false)
            .err()
            .unwrap()
            .contains("at least one rule"));
        let unknown = Config::from_pairs([("rule", ConfigValue::Text("x".into()))]);
        assert!(RouterRuntime::<ConditionRouter>::new(&unknown).is_err());
    }
}
