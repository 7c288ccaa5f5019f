//! Slot choices (`[slots]`, `[services.<s>.slots]`) and the governance tiers' selector
//! choice (the shunt strategy), checked against the plugins they name.

use std::collections::BTreeMap;

use axle_plugin_host::{PluginKind, PluginSpec};

use crate::raw::RawSlots;
use crate::KeyError;

/// Which plugin fills each slot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slots {
    pub serializer: Option<String>,
    pub selector: Option<String>,
    pub routers: Option<Vec<String>>,
    pub health_scorer: Option<String>,
    pub limiter: Option<String>,
    /// Interceptors on the caller, in chain order (the first runs first).
    pub client_interceptors: Option<Vec<String>>,
    /// Interceptors on the provider, in chain order.
    pub server_interceptors: Option<Vec<String>>,
    /// A selector that decides beside the live one on sampled calls, its answer never
    /// used (`docs/shadow.md`).
    pub shadow_selector: Option<String>,
    /// A router chain run beside the live one on sampled calls, its answer never used.
    pub shadow_routers: Option<Vec<String>>,
    /// A limiter asked beside the live one on sampled requests (`[slots]` only: a
    /// provider has one limiter), its answer never used.
    pub shadow_limiter: Option<String>,
    /// The share of calls the shadows decide on, 0..=1 (default
    /// [`crate::shadow::DEFAULT_SAMPLE`]).
    pub shadow_sample: Option<f64>,
}

/// `name` must be a plugin of `kind`.
fn check_kind(
    plugins: &BTreeMap<String, PluginSpec>,
    key: String,
    name: &str,
    kind: PluginKind,
) -> Result<(), KeyError> {
    match plugins.get(name) {
        None => Err((
            key,
            format!(
                "no plugin named `{name}` in [plugins]{}",
                crate::suggest::hint(name, plugins.keys().map(String::as_str))
            ),
        )),
        Some(p) if p.kind != kind => Err((
            key,
            format!("`{name}` is a {}, this slot takes a {kind}", p.kind),
        )),
        Some(_) => Ok(()),
    }
}

/// Validates one slots table (`prefix` is its dotted path, ending in `.`).
pub(crate) fn check(
    plugins: &BTreeMap<String, PluginSpec>,
    prefix: &str,
    mut s: RawSlots,
) -> Result<Slots, KeyError> {
    let key = |slot: &str| format!("{prefix}{slot}");
    // An empty name empties the slot: how a manifest laid over the defaults turns one off.
    for slot in [
        &mut s.serializer,
        &mut s.selector,
        &mut s.health_scorer,
        &mut s.limiter,
        &mut s.shadow_selector,
        &mut s.shadow_limiter,
    ] {
        if slot.as_deref() == Some("") {
            *slot = None;
        }
    }
    if let Some(n) = &s.serializer {
        check_kind(plugins, key("serializer"), n, PluginKind::Serializer)?;
    }
    if let Some(n) = &s.selector {
        check_kind(plugins, key("selector"), n, PluginKind::Selector)?;
    }
    for n in s.routers.iter().flatten() {
        check_kind(plugins, key("routers"), n, PluginKind::Router)?;
    }
    if let Some(n) = &s.health_scorer {
        check_kind(plugins, key("health-scorer"), n, PluginKind::HealthScorer)?;
    }
    if let Some(n) = &s.limiter {
        check_kind(plugins, key("limiter"), n, PluginKind::Limiter)?;
    }
    for (slot, names) in [
        ("client-interceptors", &s.client_interceptors),
        ("server-interceptors", &s.server_interceptors),
    ] {
        for (i, n) in names.iter().flatten().enumerate() {
            check_kind(plugins, key(slot), n, PluginKind::Interceptor)?;
            if names.iter().flatten().take(i).any(|seen| seen == n) {
                return Err((key(slot), format!("`{n}` is named twice in the chain")));
            }
        }
    }
    if let Some(n) = &s.shadow_selector {
        check_kind(plugins, key("shadow-selector"), n, PluginKind::Selector)?;
    }
    for (i, n) in s.shadow_routers.iter().flatten().enumerate() {
        check_kind(plugins, key("shadow-routers"), n, PluginKind::Router)?;
        if s.shadow_routers
            .iter()
            .flatten()
            .take(i)
            .any(|seen| seen == n)
        {
            return Err((
                key("shadow-routers"),
                format!("`{n}` is named twice in the chain"),
            ));
        }
    }
    if let Some(n) = &s.shadow_limiter {
        check_kind(plugins, key("shadow-limiter"), n, PluginKind::Limiter)?;
        if prefix != "slots." {
            return Err((
                key("shadow-limiter"),
                "a provider has one limiter: set shadow-limiter in [slots]".to_string(),
            ));
        }
    }
    if let Some(rate) = s.shadow_sample {
        crate::shadow::check_sample(rate).map_err(|reason| (key("shadow-sample"), reason))?;
    }
    Ok(Slots {
        serializer: s.serializer,
        selector: s.selector,
        routers: s.routers,
        health_scorer: s.health_scorer,
        limiter: s.limiter,
        client_interceptors: s.client_interceptors,
        server_interceptors: s.server_interceptors,
        shadow_selector: s.shadow_selector,
        shadow_routers: s.shadow_routers,
        shadow_limiter: s.shadow_limiter,
        shadow_sample: s.shadow_sample,
    })
}

/// A governance tier may pick the selector of its calls: it must be a selector.
pub(crate) fn check_tier_selector(
    plugins: &BTreeMap<String, PluginSpec>,
    prefix: &str,
    layer: &axle_governance::TierSettings,
) -> Result<(), KeyError> {
    let Some(name) = layer.selector.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let key = format!("{prefix}selector");
    match plugins.get(name) {
        None => Err((key, format!("no plugin named `{name}` in [plugins]"))),
        Some(p) if p.kind != PluginKind::Selector => {
            Err((key, format!("`{name}` is a {}, not a selector", p.kind)))
        }
        Some(_) => Ok(()),
    }
}
