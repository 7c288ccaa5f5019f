//! `[limits]` in a run-time rule: a service's limiter settings, laid into the config of
//! the plugin filling the `limiter` slot under `service.<s>.` — the keys the limiters take
//! per service (`token-bucket` and `cluster-rate`: `rate`, `burst`; `sliding-window`:
//! `rate`, `window-ms`). So a rule
//!
//! ```toml
//! [limits]
//! rate = 50
//! burst = 10
//! ```
//!
//! for `echo` means exactly `[plugins.<limiter>.config.service.echo] rate = 50, burst = 10`
//! in the manifest. Here the shape is checked (a table of numbers, strings or booleans, a
//! limiter to give them to); the limiter's own `init` checks the values when a provider
//! loads it, and a provider that cannot keeps the limits in force.

use crate::layers::Layered;
use crate::Manifest;

/// A rule's `[limits]`, checked for shape: what a provider keeps in force per service.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits(toml::Value);

/// `service`'s rule `text` checked as every rule is (`rules::apply`), and its `[limits]`
/// (`None`: the rule sets none).
pub fn limits_of(base: &Layered, service: &str, text: &str) -> Result<Option<Limits>, String> {
    crate::rules::apply(base, service, text)?;
    let rule: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message().trim_end()))?;
    Ok(rule.get("limits").cloned().map(Limits))
}

/// Lays `limits` into `manifest`'s limiter config for `service` ([`apply`]).
pub fn lay(manifest: &mut Manifest, service: &str, limits: &Limits) -> Result<(), String> {
    apply(manifest, service, &limits.0)
}

/// Lays `limits` (the rule's `[limits]` value) into `manifest`'s limiter config for
/// `service`, replacing what the manifest said for that service; or why it cannot.
pub fn apply(manifest: &mut Manifest, service: &str, limits: &toml::Value) -> Result<(), String> {
    let toml::Value::Table(limits) = limits else {
        return Err("limits: a table of the limiter's per-service keys (rate, burst, ...)".into());
    };
    for (key, value) in limits {
        axle_core::validate::name("limit", key).map_err(|r| format!("limits.{key}: {r}"))?;
        if value.is_table() || value.is_array() || value.is_datetime() {
            return Err(format!(
                "limits.{key}: a limit is a number, a string or a boolean"
            ));
        }
    }
    let Some(name) = manifest.slots.limiter.clone() else {
        return Err("limits: no plugin fills the `limiter` slot to give them to".into());
    };
    let Some(spec) = manifest.plugins.get_mut(&name) else {
        return Err(format!(
            "limits: the limiter slot names `{name}`, which is not declared"
        ));
    };
    let services = spec
        .config
        .entry("service")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(services) = services else {
        return Err(format!(
            "limits: plugins.{name}.config.service is not a table, so no service's limits can go there"
        ));
    };
    services.insert(service.to_string(), toml::Value::Table(limits.clone()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::rules::apply as rule;
    use crate::Manifest;

    fn base() -> crate::Layered {
        Manifest::layered(None).expect("the embedded manifest")
    }

    #[test]
    fn limits_land_in_the_limiters_config_for_the_service() {
        let m = rule(&base(), "echo", "[limits]\nrate = 50\nburst = 10\n").expect("good");
        let limiter = m.slots.limiter.clone().expect("a limiter slot");
        let config = &m.plugins[&limiter].config;
        assert_eq!(config["service"]["echo"]["rate"].as_integer(), Some(50));
        assert_eq!(config["service"]["echo"]["burst"].as_integer(), Some(10));
        // The manifest's own keys stay.
        assert!(config.contains_key("rate"));
    }

    #[test]
    fn a_providers_limits_are_the_rules_limits_laid_over_its_manifest() {
        let b = base();
        let none = super::limits_of(&b, "echo", "[governance]\nretries = 0\n").unwrap();
        assert_eq!(none, None);
        let limits = super::limits_of(&b, "echo", "[limits]\nrate = 7\n")
            .unwrap()
            .expect("limits");
        let mut m = Manifest::from_layers(&b).unwrap();
        super::lay(&mut m, "kv", &limits).unwrap();
        let limiter = m.slots.limiter.clone().unwrap();
        assert_eq!(
            m.plugins[&limiter].config["service"]["kv"]["rate"].as_integer(),
            Some(7)
        );
        assert!(super::limits_of(&b, "echo", "[limits]\nrate = {}\n").is_err());
    }

    #[test]
    fn bad_limits_are_refused_with_a_reason() {
        for (text, expected) in [
            ("limits = 5\n", "a table"),
            ("[limits]\nrate = [1, 2]\n", "limits.rate"),
            ("[limits.rate]\nx = 1\n", "limits.rate"),
        ] {
            let e = rule(&base(), "echo", text).expect_err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
