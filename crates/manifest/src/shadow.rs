//! Shadow slots (`shadow-selector`, `shadow-routers`, `shadow-limiter`, `shadow-sample`):
//! a candidate plugin decides beside the live one on a sampled share of calls and its
//! answer is never used (`docs/shadow.md`). What is checked here is what keeps the live
//! path untouched: a shadow never is a plugin that fills a live slot anywhere, because a
//! plugin is loaded once per manifest name and a shadow's calls would move that plugin's
//! state (a round-robin's cursor, a token bucket's tokens).

use std::collections::BTreeSet;

use crate::{KeyError, Manifest, Slots};

/// The share of calls a shadow decides on when `shadow-sample` is not written: one in a
/// hundred bounds its cost to about 1% of one plugin call per request, and still gives a
/// few thousand comparisons a minute on a service doing a hundred calls a second.
pub const DEFAULT_SAMPLE: f64 = 0.01;

/// `shadow-sample` is a share: a finite number in 0..=1.
pub(crate) fn check_sample(rate: f64) -> Result<(), String> {
    match rate.is_finite() && (0.0..=1.0).contains(&rate) {
        true => Ok(()),
        false => Err(format!(
            "{rate} is not a share of calls: write a number from 0 to 1 (0.01 samples one call in a hundred)"
        )),
    }
}

/// The sampling rate of a resolved slots table.
pub fn sample(slots: &Slots) -> f64 {
    slots.shadow_sample.unwrap_or(DEFAULT_SAMPLE)
}

/// Every plugin name that fills a live slot somewhere: the default slots, every service's,
/// and the selectors governance tiers name.
fn live_names(m: &Manifest) -> BTreeSet<&str> {
    let mut live = BTreeSet::new();
    for slots in std::iter::once(&m.slots).chain(m.services.values()) {
        let singles = [
            &slots.serializer,
            &slots.selector,
            &slots.health_scorer,
            &slots.limiter,
        ];
        live.extend(singles.into_iter().flatten().map(String::as_str));
        let chains = [
            &slots.routers,
            &slots.client_interceptors,
            &slots.server_interceptors,
        ];
        live.extend(chains.into_iter().flatten().flatten().map(String::as_str));
    }
    let tiers = std::iter::once(&m.governance)
        .chain(m.service_governance.values())
        .chain(m.method_governance.values());
    live.extend(tiers.filter_map(|t| t.selector.as_deref()));
    live.remove("");
    live
}

/// No shadow is a plugin some live slot uses (it would share its instance and state).
/// Loading checks it; so does anything that changes a loaded manifest's slots (a swap):
/// the error is the dotted key and the reason.
pub fn check_apart(m: &Manifest) -> Result<(), KeyError> {
    let live = live_names(m);
    let tables = std::iter::once(("slots.".to_string(), &m.slots)).chain(
        m.services
            .iter()
            .map(|(name, s)| (format!("services.{name}.slots."), s)),
    );
    for (prefix, slots) in tables {
        let named = [
            ("shadow-selector", slots.shadow_selector.iter().collect()),
            (
                "shadow-routers",
                slots.shadow_routers.iter().flatten().collect(),
            ),
            ("shadow-limiter", slots.shadow_limiter.iter().collect()),
        ];
        for (key, names) in named {
            let names: Vec<&String> = names;
            if let Some(n) = names.into_iter().find(|n| live.contains(n.as_str())) {
                return Err((
                    format!("{prefix}{key}"),
                    format!(
                        "`{n}` fills a live slot: a shadow must be a plugin of its own (its calls \
                         would move the live plugin's state); to compare a plugin with itself, \
                         declare a second [plugins] entry with the same component"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Manifest;
    use std::path::Path;

    const BASE: &str = "
[plugins.rr]
kind = \"selector\"
component = \"builtin:round-robin\"
[plugins.candidate]
kind = \"selector\"
component = \"builtin:random\"
[plugins.lanes]
kind = \"router\"
component = \"builtin:tag\"
[plugins.bucket]
kind = \"limiter\"
component = \"builtin:token-bucket\"
[plugins.tight]
kind = \"limiter\"
component = \"builtin:token-bucket\"
[slots]
selector = \"rr\"
limiter = \"bucket\"
";

    fn load(extra: &str) -> Result<Manifest, String> {
        Manifest::parse(&format!("{BASE}{extra}"), "t.toml", Path::new("/"))
            .map_err(|e| format!("{}: {}", e.key, e.reason))
    }

    #[test]
    fn shadows_resolve_per_service_with_the_default_sample() {
        let m = load(
            "shadow-selector = \"candidate\"\nshadow-limiter = \"tight\"\n\
             [services.kv.slots]\nshadow-routers = [\"lanes\"]\nshadow-sample = 1.0\n",
        )
        .unwrap();
        let kv = m.slots_for("kv");
        assert_eq!(kv.shadow_selector.as_deref(), Some("candidate"));
        assert_eq!(kv.shadow_routers, Some(vec!["lanes".to_string()]));
        assert_eq!(super::sample(&kv), 1.0);
        let other = m.slots_for("echo");
        assert_eq!(other.shadow_routers, None);
        assert_eq!(super::sample(&other), super::DEFAULT_SAMPLE);
        assert_eq!(m.slots.shadow_limiter.as_deref(), Some("tight"));
    }

    #[test]
    fn a_shadow_of_the_wrong_kind_or_unknown_is_refused() {
        let e = load("shadow-selector = \"tight\"\n").unwrap_err();
        assert!(
            e.contains("slots.shadow-selector") && e.contains("limiter"),
            "{e}"
        );
        let e = load("shadow-routers = [\"nope\"]\n").unwrap_err();
        assert!(e.contains("no plugin named `nope`"), "{e}");
        let e = load("shadow-limiter = \"candidate\"\n").unwrap_err();
        assert!(e.contains("shadow-limiter"), "{e}");
    }

    #[test]
    fn a_sample_outside_zero_to_one_is_refused() {
        for bad in ["1.5", "-0.1", "nan"] {
            let e = load(&format!("shadow-sample = {bad}\n")).unwrap_err();
            assert!(
                e.contains("shadow-sample") && e.contains("from 0 to 1"),
                "{e}"
            );
        }
        assert!(load("shadow-sample = 0\n").is_ok());
    }

    #[test]
    fn a_shadow_filling_a_live_slot_is_refused() {
        let e = load("shadow-selector = \"rr\"\n").unwrap_err();
        assert!(e.contains("fills a live slot"), "{e}");
        // Live in another service is live too.
        let e = load(
            "shadow-selector = \"candidate\"\n[services.kv.slots]\nselector = \"candidate\"\n",
        )
        .unwrap_err();
        assert!(e.contains("slots.shadow-selector"), "{e}");
        let e = load("shadow-limiter = \"bucket\"\n").unwrap_err();
        assert!(e.contains("fills a live slot"), "{e}");
    }

    #[test]
    fn a_shadow_limiter_is_set_for_the_whole_provider() {
        let e = load("[services.kv.slots]\nshadow-limiter = \"tight\"\n").unwrap_err();
        assert!(
            e.contains("services.kv.slots.shadow-limiter") && e.contains("[slots]"),
            "{e}"
        );
    }
}
