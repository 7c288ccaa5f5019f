//! `{{name}}`: an access check on the provider. At `server-before` (after the trust
//! boundary, before the limiter and the handler) it refuses with `forbidden` a caller whose
//! application is in `deny`, and with `bad-request` a request without the `require-tag`
//! tag; every other call passes unchanged.
//!
//! It reads only parts that are the same for every call of one shape (the caller's
//! application, and the tags when `require-tag` is set), never a per-call part (trace,
//! deadline, payload): the kernel then memoises each answer per distinct caller and tags,
//! and this code runs once per shape, not once per call. So `intercept` must depend on
//! nothing but the config and those parts (no clock, no counters).
//!
//! Config (defaults in brackets): `deny` [none]: application names, an array of strings
//! (or one string); `deny-unnamed` [false]: also refuse callers that name no application;
//! `require-tag` [none]: a tag key every request must carry.

use axle_sdk::{
    Config, InterceptCall, InterceptDeclaration, InterceptPoint, InterceptReads, InterceptVerdict,
    Interceptor, Refusal,
};

/// The interceptor.
pub struct AccessCheck {
    deny: Vec<String>,
    deny_unnamed: bool,
    require_tag: Option<String>,
}

impl Interceptor for AccessCheck {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["deny", "deny-unnamed", "require-tag"])?;
        let deny = config.texts("deny")?;
        if deny.iter().any(String::is_empty) {
            return Err(
                "key `deny`: an empty name; use `deny-unnamed = true` for callers that name \
                 no application"
                    .to_string(),
            );
        }
        let deny_unnamed = config.bool_or("deny-unnamed", false)?;
        let require_tag = match config.get("require-tag") {
            None => None,
            Some(_) => {
                let tag = config.text_or("require-tag", "")?;
                if tag.is_empty() {
                    return Err("key `require-tag`: must not be empty".to_string());
                }
                Some(tag)
            }
        };
        Ok(AccessCheck {
            deny,
            deny_unnamed,
            require_tag,
        })
    }

    fn declare(&self) -> InterceptDeclaration {
        InterceptDeclaration {
            points: vec![InterceptPoint::ServerBefore],
            // Only what the config needs: every part read multiplies the shapes memoised.
            reads: InterceptReads {
                consumer: true,
                tags: self.require_tag.is_some(),
                ..InterceptReads::default()
            },
        }
    }

    fn intercept(&mut self, call: &InterceptCall) -> InterceptVerdict {
        if call.point != InterceptPoint::ServerBefore {
            return InterceptVerdict::Pass;
        }
        let app = call.consumer_app.as_str();
        if (app.is_empty() && self.deny_unnamed) || self.deny.iter().any(|d| d == app) {
            let who = if app.is_empty() {
                "a caller that names no application".to_string()
            } else {
                format!("application `{app}`")
            };
            return refuse(
                "forbidden",
                format!("{who} may not call {}/{}", call.service, call.method),
            );
        }
        if let Some(tag) = &self.require_tag {
            if call.tag(tag).is_none() {
                return refuse(
                    "bad-request",
                    format!("{}/{} needs the tag `{tag}`", call.service, call.method),
                );
            }
        }
        InterceptVerdict::Pass
    }
}

fn refuse(class: &str, message: String) -> InterceptVerdict {
    InterceptVerdict::Refuse(Refusal {
        class: class.to_string(),
        message,
    })
}

axle_sdk::export_interceptor!(AccessCheck);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{call_at, ConfigValue};

    fn plugin(pairs: Vec<(&str, ConfigValue)>) -> Result<AccessCheck, String> {
        AccessCheck::new(&Config::from_pairs(pairs))
    }

    fn from(app: &str, tags: &[(&str, &str)]) -> InterceptCall {
        let mut call = call_at(InterceptPoint::ServerBefore, "echo", "say");
        call.consumer_app = app.to_string();
        call.tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        call
    }

    fn class(verdict: InterceptVerdict) -> Option<String> {
        match verdict {
            InterceptVerdict::Refuse(r) => Some(r.class),
            _ => None,
        }
    }

    #[test]
    fn denied_applications_are_forbidden_and_others_pass() {
        let deny = ConfigValue::Texts(vec!["batch".into(), "legacy".into()]);
        let mut p = plugin(vec![("deny", deny)]).unwrap();
        let declared = p.declare();
        assert_eq!(declared.points, vec![InterceptPoint::ServerBefore]);
        assert!(declared.reads.consumer && !declared.reads.tags);
        assert!(!declared.reads.per_call());
        assert_eq!(
            class(p.intercept(&from("legacy", &[]))).as_deref(),
            Some("forbidden")
        );
        assert_eq!(p.intercept(&from("web", &[])), InterceptVerdict::Pass);
        assert_eq!(p.intercept(&from("", &[])), InterceptVerdict::Pass);
    }

    #[test]
    fn unnamed_callers_and_missing_tags_are_refused_when_configured() {
        let mut p = plugin(vec![
            ("deny-unnamed", ConfigValue::Flag(true)),
            ("require-tag", ConfigValue::Text("tenant".into())),
        ])
        .unwrap();
        assert!(p.declare().reads.tags);
        assert_eq!(
            class(p.intercept(&from("", &[("tenant", "a")]))).as_deref(),
            Some("forbidden")
        );
        assert_eq!(
            class(p.intercept(&from("web", &[]))).as_deref(),
            Some("bad-request")
        );
        assert_eq!(
            p.intercept(&from("web", &[("tenant", "a")])),
            InterceptVerdict::Pass
        );
    }

    #[test]
    fn bad_config_is_refused_with_the_key() {
        for (pairs, says) in [
            (
                vec![("denny", ConfigValue::Text("x".into()))],
                "unknown key `denny`",
            ),
            (vec![("deny", ConfigValue::Int(1))], "key `deny`"),
            (
                vec![("deny", ConfigValue::Texts(vec!["".into()]))],
                "key `deny`",
            ),
            (
                vec![("deny-unnamed", ConfigValue::Text("yes".into()))],
                "key `deny-unnamed`",
            ),
            (
                vec![("require-tag", ConfigValue::Text(String::new()))],
                "key `require-tag`",
            ),
        ] {
            let err = plugin(pairs).err().expect("refused");
            assert!(err.contains(says), "{err}");
        }
    }
}
