//! Run-time rules (`axle rules`, `axle_discovery::rules`): a service's rule is a TOML
//! document of governance overrides, laid over the manifest like one more manifest layer
//! and validated as a whole manifest, so a rule key means exactly what the manifest key
//! means and a bad value is refused with the manifest's own message.
//!
//! ```toml
//! [governance]                 # the service tier: [services.<s>.governance]
//! retries = 0
//! [methods.get]                # a method tier: [services.<s>.methods.get]
//! timeout-ms = 200
//! ```
//!
//! `[route]` and `[weights]` tables carry a service's route and endpoint weight overrides
//! (`rules_route.rs`). `[limits]` carries the service's limiter settings
//! (`rules_limits.rs`). Nothing else may appear in a rule.

use std::path::Path;

use crate::layers::{merge, Layer, Layered};
use crate::Manifest;

/// `base` with `service`'s rule `text` laid over it, validated; or why the rule is bad.
pub fn apply(base: &Layered, service: &str, text: &str) -> Result<Manifest, String> {
    let rule: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message().trim_end()))?;
    for (key, value) in &rule {
        match (key.as_str(), value) {
            ("governance", toml::Value::Table(_)) => {}
            // The limiter's settings for the service (`rules_limits.rs`).
            ("limits", _) => {}
            // Routes and weights (`rules_route.rs`).
            ("route", _) | ("weights", toml::Value::Table(_)) => {}
            ("methods", toml::Value::Table(methods)) => {
                if let Some((method, _)) = methods.iter().find(|(_, m)| !m.is_table()) {
                    return Err(format!("methods.{method}: a method tier is a table"));
                }
            }
            _ => {
                return Err(format!(
                    "`{key}`: a rule may hold only [governance], [methods.<m>], [route] and \
                     [weights] tables"
                ))
            }
        }
    }
    let mut rule = rule;
    let plugins = crate::rules_route::lay_out(&mut rule, service, base)?;
    // Limits are plugin config, not a service tier: laid into the limiter's config once
    // the rest has made a manifest.
    let limits = rule.remove("limits");
    let mut service_table = toml::Table::new();
    service_table.insert(service.to_string(), toml::Value::Table(rule));
    let mut over = toml::Table::new();
    over.insert("services".into(), toml::Value::Table(service_table));
    if let Some(plugins) = plugins {
        over.insert("plugins".into(), toml::Value::Table(plugins));
    }
    let top = base.layers.last();
    let rule_layer = Layer {
        file: format!("<rule of {service}>"),
        text: text.to_string(),
        base: top.map_or_else(|| Path::new(".").to_path_buf(), |l| l.base.clone()),
    };
    let under = Layer {
        file: top.map_or_else(String::new, |l| l.file.clone()),
        text: String::new(),
        base: rule_layer.base.clone(),
    };
    let layered = merge(vec![(under, base.table.clone()), (rule_layer, over)]);
    let mut manifest = Manifest::from_layers(&layered).map_err(|e| e.to_string())?;
    if let Some(limits) = limits {
        crate::rules_limits::apply(&mut manifest, service, &limits)?;
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Layered {
        Manifest::layered(None).expect("the embedded manifest")
    }

    #[test]
    fn a_rule_overrides_a_service_and_a_method_tier() {
        let m = apply(
            &base(),
            "echo",
            "[governance]\nretries = 0\n[methods.echo]\ntimeout-ms = 123\n",
        )
        .expect("a good rule");
        assert_eq!(m.governance("echo", "other").retries, 0);
        assert_eq!(m.governance("echo", "echo").timeout_ms, 123);
    }

    #[test]
    fn bad_rules_are_refused_with_a_reason() {
        for (text, expected) in [
            ("[governance\n", "not valid TOML"),
            ("[slots]\nselector = \"random\"\n", "a rule may hold only"),
            ("methods.get = 1\n", "methods.get"),
            ("[methods.get]\nno-such-key = 1\n", "no-such-key"),
            ("[governance]\nretries = \"many\"\n", "retries"),
            ("[governance]\nno-such-key = 1\n", "no-such-key"),
        ] {
            let e = apply(&base(), "echo", text).expect_err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
