//! A run-time rule's `[route]` and `[weights]` tables (`rules.rs`), turned into the
//! manifest keys they stand for, so they are checked like any manifest and a client
//! applies them by swapping to the result:
//!
//! ```toml
//! [route]                          # a `condition` router, first in the service's routers
//! rules = ["app = billing => lane = canary", "=> version = 2.*"]
//! force = false
//! [weights]                        # [services.<s>.weights]: endpoint weight overrides
//! "127.0.0.1:7301" = 50
//! ```
//!
//! The route becomes plugin `rule.route.<service>` (`builtin:condition`), placed before the
//! routers the manifest gives the service; its rules are parsed by the plugin's `init` when
//! a client (or `axle rules put`) loads it, and a rule that fails there is refused like any
//! bad rule.

use crate::layers::Layered;
use crate::Manifest;

/// The name of the router a service's rule installs.
pub fn route_plugin(service: &str) -> String {
    format!("rule.route.{service}")
}

/// Moves `rule`'s `[route]` into the `[slots]` it stands for and returns the
/// `[plugins]` table it needs; `[weights]` stays as it is (the manifest key has the same
/// name and shape). `None`: the rule has no route.
pub(crate) fn lay_out(
    rule: &mut toml::Table,
    service: &str,
    base: &Layered,
) -> Result<Option<toml::Table>, String> {
    let Some(route) = rule.remove("route") else {
        return Ok(None);
    };
    let toml::Value::Table(route) = route else {
        return Err("route: a table of `rules` (and `force`)".into());
    };
    if let Some(key) = route
        .keys()
        .find(|k| !["rules", "force"].contains(&k.as_str()))
    {
        return Err(format!("route.{key}: a route has only `rules` and `force`"));
    }
    match route.get("rules") {
        Some(toml::Value::Array(rules))
            if !rules.is_empty() && rules.iter().all(toml::Value::is_str) => {}
        _ => return Err("route.rules: a non-empty list of condition rules (strings)".into()),
    }
    let manifest = Manifest::from_layers(base).map_err(|e| e.to_string())?;
    let name = route_plugin(service);
    let mut routers = vec![toml::Value::String(name.clone())];
    routers.extend(
        manifest
            .slots_for(service)
            .routers
            .unwrap_or_default()
            .into_iter()
            .filter(|r| *r != name)
            .map(toml::Value::String),
    );
    let mut slots = toml::Table::new();
    slots.insert("routers".into(), toml::Value::Array(routers));
    rule.insert("slots".into(), toml::Value::Table(slots));
    let mut plugin = toml::Table::new();
    plugin.insert("kind".into(), "router".into());
    plugin.insert("component".into(), "builtin:condition".into());
    plugin.insert("config".into(), toml::Value::Table(route));
    let mut plugins = toml::Table::new();
    plugins.insert(name, toml::Value::Table(plugin));
    Ok(Some(plugins))
}

#[cfg(test)]
mod tests {
    use crate::rules::apply;
    use crate::Manifest;

    fn base() -> crate::layers::Layered {
        Manifest::layered(None).expect("the embedded manifest")
    }

    #[test]
    fn a_route_becomes_the_first_router_and_weights_overrides() {
        let m = apply(
            &base(),
            "echo",
            "[route]\nrules = [\"=> version = 2.*\"]\n[weights]\n\"127.0.0.1:7301\" = 50\n",
        )
        .expect("a good rule");
        let routers = m.slots_for("echo").routers.unwrap_or_default();
        assert_eq!(routers, ["rule.route.echo", "tag"], "before the manifest's");
        let spec = &m.plugins["rule.route.echo"];
        assert_eq!(spec.component.to_string(), "builtin:condition");
        assert_eq!(m.weight_overrides["echo"]["127.0.0.1:7301"], 50);
        assert!(m.slots_for("kv").routers.unwrap_or_default() == ["tag"]);
    }

    #[test]
    fn bad_routes_and_weights_are_refused() {
        for (text, expected) in [
            ("route = 1\n", "route: a table"),
            ("[route]\nrules = []\n", "route.rules"),
            ("[route]\nrules = [1]\n", "route.rules"),
            (
                "[route]\nrules = [\"=> a = b\"]\nstrict = true\n",
                "route.strict",
            ),
            ("[weights]\n\"127.0.0.1:7301\" = 0\n", "between 1 and"),
            ("[weights]\n\"127.0.0.1:7301\" = \"x\"\n", "weights"),
        ] {
            let e = apply(&base(), "echo", text).expect_err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
