//! `allow-apps`: admits or refuses calls by the calling application's name (the consumer
//! app a caller sends). It reads nothing else, so the kernel memoises its answer per
//! application: it runs once per app, service and method, not once per call.
//!
//! Config: `allow` and/or `deny` (names; a trailing `*` matches any suffix, `*` alone
//! any name), `points` (default `server-before`), `class` of the refusal (default
//! `forbidden`), `allow-unknown` for callers that send no name (default: `true` with
//! only a deny list, `false` once there is an allow list — an allow list is a closed
//! door). `deny` wins over `allow`.

use axle_sdk::*;

/// One name pattern: exact, or a prefix when it ends in `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    fn parse(key: &str, text: &str) -> Result<Pattern, String> {
        let text = text.trim();
        let (body, prefix) = match text.strip_suffix('*') {
            Some(body) => (body, true),
            None => (text, false),
        };
        if body.contains('*') {
            return Err(format!(
                "key `{key}`: `{text}`: `*` may only end a pattern (`billing-*`)"
            ));
        }
        if body.is_empty() && !prefix {
            return Err(format!("key `{key}`: an empty name matches nothing"));
        }
        Ok(if prefix {
            Pattern::Prefix(body.to_string())
        } else {
            Pattern::Exact(body.to_string())
        })
    }

    fn matches(&self, app: &str) -> bool {
        match self {
            Pattern::Exact(name) => name == app,
            Pattern::Prefix(prefix) => app.starts_with(prefix.as_str()),
        }
    }
}

/// The plugin: its lists and answers.
pub struct AllowApps {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    allow_unknown: bool,
    class: String,
    points: Vec<InterceptPoint>,
}

impl AllowApps {
    /// The refusal for `why`.
    fn refuse(&self, why: String) -> InterceptVerdict {
        InterceptVerdict::Refuse(Refusal {
            class: self.class.clone(),
            message: why,
        })
    }
}

fn patterns(config: &Config, key: &str) -> Result<Vec<Pattern>, String> {
    config
        .texts(key)?
        .iter()
        .map(|t| Pattern::parse(key, t))
        .collect()
}

impl Interceptor for AllowApps {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["allow", "deny", "points", "class", "allow-unknown"])?;
        let allow = patterns(config, "allow")?;
        let deny = patterns(config, "deny")?;
        if allow.is_empty() && deny.is_empty() {
            return Err("name applications in `allow` and/or `deny`".into());
        }
        let class = config.text_or("class", "forbidden")?;
        let class = refusal_class(&class).ok_or_else(|| {
            format!(
                "key `class`: `{}` is not a class a refusal may name ({})",
                class.trim().replace('-', "_"),
                REFUSAL_CLASSES.join(", ")
            )
        })?;
        Ok(AllowApps {
            allow_unknown: config.bool_or("allow-unknown", allow.is_empty())?,
            allow,
            deny,
            class: class.to_string(),
            points: points_from(config, "points", &[InterceptPoint::ServerBefore])?,
        })
    }

    fn declare(&self) -> InterceptDeclaration {
        InterceptDeclaration {
            points: self.points.clone(),
            reads: InterceptReads {
                consumer: true,
                ..InterceptReads::default()
            },
        }
    }

    fn intercept(&mut self, call: &InterceptCall) -> InterceptVerdict {
        let app = call.consumer_app.as_str();
        let target = format!("{}/{}", call.service, call.method);
        if app.is_empty() {
            return if self.allow_unknown {
                InterceptVerdict::Pass
            } else {
                self.refuse(format!(
                    "{target}: the caller sent no application name, and only named applications may call"
                ))
            };
        }
        if self.deny.iter().any(|p| p.matches(app)) {
            return self.refuse(format!("{target}: application `{app}` is denied"));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.matches(app)) {
            return self.refuse(format!("{target}: application `{app}` is not allowed"));
        }
        InterceptVerdict::Pass
    }
}

axle_sdk::export_interceptor!(AllowApps);

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[&str]) -> ConfigValue {
        ConfigValue::Texts(v.iter().map(|s| s.to_string()).collect())
    }

    fn plugin(pairs: Vec<(&str, ConfigValue)>) -> Result<AllowApps, String> {
        AllowApps::new(&Config::from_pairs(pairs))
    }

    fn ask(p: &mut AllowApps, app: &str) -> InterceptVerdict {
        let mut call = call_at(InterceptPoint::ServerBefore, "orders", "place");
        call.consumer_app = app.into();
        p.intercept(&call)
    }

    fn refused(v: &InterceptVerdict) -> Option<&str> {
        match v {
            InterceptVerdict::Refuse(r) => Some(&r.class),
            _ => None,
        }
    }

    #[test]
    fn an_allow_list_admits_its_names_and_prefixes_only() {
        let mut p = plugin(vec![("allow", texts(&["web", "billing-*"]))]).unwrap();
        assert_eq!(ask(&mut p, "web"), InterceptVerdict::Pass);
        assert_eq!(ask(&mut p, "billing-eu"), InterceptVerdict::Pass);
        assert_eq!(refused(&ask(&mut p, "webby")), Some("forbidden"));
        assert_eq!(refused(&ask(&mut p, "")), Some("forbidden"), "closed door");
        let InterceptVerdict::Refuse(r) = ask(&mut p, "batch") else {
            panic!("batch is not allowed")
        };
        assert!(r.message.contains("`batch`") && r.message.contains("orders/place"));
    }

    #[test]
    fn deny_wins_and_a_deny_list_alone_admits_unknown_callers() {
        let mut p = plugin(vec![
            ("allow", texts(&["*"])),
            ("deny", texts(&["scraper*"])),
        ])
        .unwrap();
        assert_eq!(refused(&ask(&mut p, "scraper-2")), Some("forbidden"));
        assert_eq!(ask(&mut p, "web"), InterceptVerdict::Pass);
        let mut deny_only = plugin(vec![("deny", texts(&["bad"]))]).unwrap();
        assert_eq!(ask(&mut deny_only, ""), InterceptVerdict::Pass);
        assert!(refused(&ask(&mut deny_only, "bad")).is_some());
        let mut strict = plugin(vec![
            ("deny", texts(&["bad"])),
            ("allow-unknown", ConfigValue::Flag(false)),
            ("class", ConfigValue::Text("bad-request".into())),
        ])
        .unwrap();
        assert_eq!(refused(&ask(&mut strict, "")), Some("bad_request"));
    }

    #[test]
    fn it_reads_only_the_consumer_so_it_is_memoised() {
        let p = plugin(vec![
            ("allow", texts(&["web"])),
            ("points", texts(&["client-before", "server-before"])),
        ])
        .unwrap();
        let d = p.declare();
        assert!(d.reads.consumer && !d.reads.tags && !d.reads.per_call());
        assert_eq!(
            d.points,
            vec![InterceptPoint::ClientBefore, InterceptPoint::ServerBefore]
        );
    }

    #[test]
    fn bad_config_names_the_key() {
        let err = |pairs| plugin(pairs).err().expect("refused");
        assert!(err(vec![]).contains("allow"));
        assert!(err(vec![("allow", texts(&["a*b"]))]).contains("`allow`"));
        assert!(err(vec![("deny", texts(&[""]))]).contains("`deny`"));
        let class = err(vec![
            ("allow", texts(&["a"])),
            ("class", ConfigValue::Text("deadline-exceeded".into())),
        ]);
        assert!(class.contains("`class`"), "{class}");
        assert!(err(vec![("allow", texts(&["a"])), ("alow", texts(&["b"]))]).contains("alow"));
    }
}
