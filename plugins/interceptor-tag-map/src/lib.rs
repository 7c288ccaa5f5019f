//! `tag-map`: copies or renames request tags (the headers a caller or the gateway sent)
//! to the keys routing and handlers read, and fills defaults. It reads only the tags, so
//! the kernel memoises its answer per tag set: it runs once per distinct set, not once
//! per call.
//!
//! Config: `map = ["x-lane=lane", ...]` (when the call carries the source tag, the target
//! gets its value, replacing any value it had), `drop-source` (remove the source tags
//! mapped; default false), `set = ["lane=stable", ...]` (tags a call gets when it carries
//! none of that key, after mapping), `points` (`client-before`, `server-before` or both;
//! default `client-before`: on the caller, so the mapped tags route the call).

use axle_sdk::*;

/// The plugin: its mapping and defaults.
pub struct TagMap {
    map: Vec<(String, String)>,
    drop_source: bool,
    set: Vec<(String, String)>,
    points: Vec<InterceptPoint>,
}

/// `a=b` pairs of config key `key`, each side non-empty.
fn pairs(config: &Config, key: &str) -> Result<Vec<(String, String)>, String> {
    config
        .texts(key)?
        .iter()
        .map(|entry| match entry.split_once('=') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                Ok((a.trim().to_string(), b.trim().to_string()))
            }
            _ => Err(format!(
                "key `{key}`: `{entry}` is not `name=value` with both sides non-empty"
            )),
        })
        .collect()
}

fn put(tags: &mut Vec<(String, String)>, key: &str, value: &str) {
    match tags.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_string(),
        None => tags.push((key.to_string(), value.to_string())),
    }
}

impl Interceptor for TagMap {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["map", "drop-source", "set", "points"])?;
        let map = pairs(config, "map")?;
        let set = pairs(config, "set")?;
        if map.is_empty() && set.is_empty() {
            return Err("give `map` and/or `set`: with neither there is nothing to do".into());
        }
        if let Some((a, _)) = map.iter().find(|(a, b)| a == b) {
            return Err(format!("key `map`: `{a}={a}` maps a tag onto itself"));
        }
        let points = points_from(config, "points", &[InterceptPoint::ClientBefore])?;
        if let Some(p) = points.iter().find(|p| !p.is_before()) {
            return Err(format!(
                "key `points`: tags can change only before a call, not at {}",
                p.name()
            ));
        }
        Ok(TagMap {
            map,
            drop_source: config.bool_or("drop-source", false)?,
            set,
            points,
        })
    }

    fn declare(&self) -> InterceptDeclaration {
        InterceptDeclaration {
            points: self.points.clone(),
            reads: InterceptReads {
                tags: true,
                ..InterceptReads::default()
            },
        }
    }

    fn intercept(&mut self, call: &InterceptCall) -> InterceptVerdict {
        let mut tags = call.tags.clone();
        for (source, target) in &self.map {
            if let Some(value) = call.tag(source) {
                put(&mut tags, target, value);
            }
        }
        if self.drop_source {
            let targets: Vec<&str> = self.map.iter().map(|(_, t)| t.as_str()).collect();
            tags.retain(|(k, _)| {
                targets.contains(&k.as_str()) || !self.map.iter().any(|(s, _)| s == k)
            });
        }
        for (key, value) in &self.set {
            if !tags.iter().any(|(k, _)| k == key) {
                tags.push((key.clone(), value.clone()));
            }
        }
        if tags == call.tags {
            InterceptVerdict::Pass
        } else {
            InterceptVerdict::SetTags(tags)
        }
    }
}

axle_sdk::export_interceptor!(TagMap);

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[&str]) -> ConfigValue {
        ConfigValue::Texts(v.iter().map(|s| s.to_string()).collect())
    }

    fn plugin(pairs: Vec<(&str, ConfigValue)>) -> Result<TagMap, String> {
        TagMap::new(&Config::from_pairs(pairs))
    }

    fn ask(p: &mut TagMap, tags: &[(&str, &str)]) -> InterceptVerdict {
        let mut call = call_at(InterceptPoint::ClientBefore, "orders", "place");
        call.tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p.intercept(&call)
    }

    fn set(tags: &[(&str, &str)]) -> InterceptVerdict {
        InterceptVerdict::SetTags(
            tags.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_header_is_copied_to_the_routing_key() {
        let mut p = plugin(vec![("map", texts(&["x-lane=lane"]))]).unwrap();
        assert_eq!(
            ask(&mut p, &[("x-lane", "canary")]),
            set(&[("x-lane", "canary"), ("lane", "canary")])
        );
        assert_eq!(
            ask(&mut p, &[("lane", "old"), ("x-lane", "canary")]),
            set(&[("lane", "canary"), ("x-lane", "canary")]),
            "the header wins over a value the target had"
        );
        assert_eq!(ask(&mut p, &[("zone", "eu")]), InterceptVerdict::Pass);
        assert_eq!(
            ask(&mut p, &[("x-lane", "a"), ("lane", "a")]),
            InterceptVerdict::Pass
        );
    }

    #[test]
    fn drop_source_renames_and_set_fills_defaults() {
        let mut p = plugin(vec![
            ("map", texts(&["x-lane=lane"])),
            ("drop-source", ConfigValue::Flag(true)),
            ("set", texts(&["lane=stable", "zone=eu"])),
        ])
        .unwrap();
        assert_eq!(
            ask(&mut p, &[("x-lane", "canary")]),
            set(&[("lane", "canary"), ("zone", "eu")])
        );
        assert_eq!(ask(&mut p, &[]), set(&[("lane", "stable"), ("zone", "eu")]));
        assert_eq!(
            ask(&mut p, &[("lane", "stable"), ("zone", "eu")]),
            InterceptVerdict::Pass
        );
    }

    #[test]
    fn it_reads_only_tags_and_runs_before_calls_only() {
        let p = plugin(vec![
            ("set", texts(&["lane=stable"])),
            ("points", texts(&["client-before", "server-before"])),
        ])
        .unwrap();
        let d = p.declare();
        assert!(d.reads.tags && !d.reads.consumer && !d.reads.per_call());
        let after = plugin(vec![
            ("set", texts(&["lane=stable"])),
            ("points", texts(&["server-after"])),
        ]);
        assert!(after.err().unwrap().contains("server-after"));
    }

    #[test]
    fn bad_config_names_the_key() {
        let err = |pairs| plugin(pairs).err().expect("refused");
        assert!(err(vec![]).contains("`map`"));
        assert!(err(vec![("map", texts(&["x-lane"]))]).contains("`map`"));
        assert!(err(vec![("set", texts(&["=v"]))]).contains("`set`"));
        assert!(err(vec![("map", texts(&["a=a"]))]).contains("onto itself"));
        assert!(err(vec![("mapp", texts(&["a=b"]))]).contains("mapp"));
    }
}
