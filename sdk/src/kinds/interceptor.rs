//! Interceptors look at a call before and after it runs, on the caller and on the
//! provider, and pass it, change its tags, or refuse it.

use crate::{Config, InterceptCall, InterceptDeclaration, InterceptPoint, InterceptVerdict};

/// A call filter. Implement this and call [`crate::export_interceptor!`].
///
/// The kernel fills only the parts of [`InterceptCall`] named in the declaration's
/// `reads`; when none of them is per call ([`crate::InterceptReads::per_call`]) it
/// memoises each answer per distinct value of the parts read, so `intercept` must then
/// depend only on the config and those parts.
pub trait Interceptor: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;

    /// Where it runs and what it reads; the kernel asks once, after `new`.
    fn declare(&self) -> InterceptDeclaration;

    /// Looks at one call at one point.
    fn intercept(&mut self, call: &InterceptCall) -> InterceptVerdict;
}

/// Reads a point by the name the WIT and the docs use (`client-before`, ...; `_` works
/// too), so plugins can take their points from config.
pub fn point_named(name: &str) -> Option<InterceptPoint> {
    InterceptPoint::ALL
        .into_iter()
        .find(|p| p.name() == name.trim().replace('_', "-"))
}

/// Reads the config key `key` as a list of point names (`default` when absent). An
/// unknown name is an error naming the key and the accepted names.
pub fn points_from(
    config: &Config,
    key: &str,
    default: &[InterceptPoint],
) -> Result<Vec<InterceptPoint>, String> {
    if config.get(key).is_none() {
        return Ok(default.to_vec());
    }
    let mut points = Vec::new();
    for name in config.texts(key)? {
        let point = point_named(&name).ok_or_else(|| {
            format!(
                "key `{key}`: unknown point `{name}` (client-before, client-after, server-before, server-after)"
            )
        })?;
        if !points.contains(&point) {
            points.push(point);
        }
    }
    if points.is_empty() {
        return Err(format!("key `{key}`: name at least one point"));
    }
    Ok(points)
}

/// A call at `point` with every part empty: the start of a native test's input.
pub fn call_at(point: InterceptPoint, service: &str, method: &str) -> InterceptCall {
    InterceptCall {
        point,
        service: service.to_string(),
        method: method.to_string(),
        tags: Vec::new(),
        consumer_app: String::new(),
        peer: String::new(),
        traceparent: String::new(),
        deadline_left_us: 0,
        payload_size: 0,
        payload: None,
        outcome: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfigValue, InterceptReads, Refusal};

    /// Refuses one consumer, tags the rest: enough to run the trait natively.
    struct DenyOne {
        deny: String,
        points: Vec<InterceptPoint>,
    }

    impl Interceptor for DenyOne {
        fn new(config: &Config) -> Result<Self, String> {
            config.reject_unknown(&["deny", "points"])?;
            Ok(DenyOne {
                deny: config.text_or("deny", "")?,
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
            if call.consumer_app == self.deny {
                InterceptVerdict::Refuse(Refusal {
                    class: "forbidden".into(),
                    message: format!("{} may not call", call.consumer_app),
                })
            } else if call.point.is_before() {
                InterceptVerdict::SetTags(vec![("seen".into(), "1".into())])
            } else {
                InterceptVerdict::Pass
            }
        }
    }

    fn config(pairs: Vec<(&str, ConfigValue)>) -> Config {
        Config::from_pairs(pairs)
    }

    #[test]
    fn a_plugin_declares_and_answers_natively() {
        let mut p = DenyOne::new(&config(vec![("deny", ConfigValue::Text("bad".into()))]))
            .expect("valid config");
        let d = p.declare();
        assert_eq!(d.points, vec![InterceptPoint::ServerBefore]);
        assert!(d.reads.consumer && !d.reads.per_call());
        let mut call = call_at(InterceptPoint::ServerBefore, "svc", "m");
        call.consumer_app = "bad".into();
        assert!(
            matches!(p.intercept(&call), InterceptVerdict::Refuse(r) if r.class == "forbidden")
        );
        call.consumer_app = "good".into();
        assert_eq!(
            p.intercept(&call),
            InterceptVerdict::SetTags(vec![("seen".into(), "1".into())])
        );
        call.point = InterceptPoint::ServerAfter;
        assert_eq!(p.intercept(&call), InterceptVerdict::Pass);
    }

    #[test]
    fn points_come_from_config_by_name() {
        let c = config(vec![(
            "points",
            ConfigValue::Texts(vec!["client_before".into(), "server-after".into()]),
        )]);
        let p = DenyOne::new(&c).expect("valid points");
        assert_eq!(
            p.declare().points,
            vec![InterceptPoint::ClientBefore, InterceptPoint::ServerAfter]
        );
        let bad = config(vec![("points", ConfigValue::Texts(vec!["middle".into()]))]);
        let err = DenyOne::new(&bad).err().expect("unknown point refused");
        assert!(err.contains("`points`") && err.contains("middle"), "{err}");
        let empty = config(vec![("points", ConfigValue::Texts(vec![]))]);
        assert!(DenyOne::new(&empty).is_err());
        let unknown = config(vec![("dney", ConfigValue::Text("x".into()))]);
        assert!(DenyOne::new(&unknown).is_err());
    }

    #[test]
    fn every_point_reads_back_by_its_name() {
        for p in InterceptPoint::ALL {
            assert_eq!(point_named(p.name()), Some(p));
        }
        assert_eq!(point_named("nowhere"), None);
    }
}
