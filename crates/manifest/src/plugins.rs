//! `[plugins.<name>]`: one entry validated into the plugin host's [`PluginSpec`], with the
//! host's defaults and bounds applied.

use std::path::Path;

use axle_plugin_host::{defaults, ComponentSource, KeyOn, PluginKind, PluginSpec};

use crate::raw::RawPlugin;
use crate::KeyError;

/// Validates one entry; the error names the key at fault.
pub(crate) fn spec(name: String, p: RawPlugin, base: &Path) -> Result<PluginSpec, KeyError> {
    let key = |k: &str| format!("plugins.{name}.{k}");
    axle_core::validate::name("plugin name", &name).map_err(|r| (format!("plugins.{name}"), r))?;
    let component = match p.component.strip_prefix("builtin:") {
        Some(b) => {
            if axle_builtins::component(b).is_none() {
                return Err((
                    key("component"),
                    format!(
                        "no builtin component `{b}` (builtins: {})",
                        axle_builtins::names().join(", ")
                    ),
                ));
            }
            ComponentSource::Builtin(b.to_string())
        }
        None if p.component.is_empty() => {
            return Err((key("component"), "must not be empty".into()))
        }
        None => ComponentSource::File(base.join(&p.component)),
    };
    let timeout_ms = p.timeout_ms.unwrap_or(defaults::CALL_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > defaults::MAX_CALL_TIMEOUT_MS {
        return Err((
            key("timeout-ms"),
            format!(
                "must be 1..={} (got {timeout_ms})",
                defaults::MAX_CALL_TIMEOUT_MS
            ),
        ));
    }
    let memory_mib = p.memory_mib.unwrap_or(defaults::MEMORY_MIB);
    if memory_mib == 0 || memory_mib > defaults::MAX_MEMORY_MIB {
        return Err((
            key("memory-mib"),
            format!(
                "must be 1..={} (got {memory_mib})",
                defaults::MAX_MEMORY_MIB
            ),
        ));
    }
    let instances = p.instances.unwrap_or_else(|| defaults::instances(p.kind));
    if instances == 0 || instances > defaults::MAX_INSTANCES {
        return Err((
            key("instances"),
            format!("must be 1..={} (got {instances})", defaults::MAX_INSTANCES),
        ));
    }
    let on_error_admit = match (p.kind, p.on_error.as_deref()) {
        (PluginKind::Interceptor, None) => defaults::INTERCEPTOR_ON_ERROR_PASSES,
        (_, None) => defaults::LIMITER_ON_ERROR_ADMITS,
        (PluginKind::Limiter, Some("admit")) => true,
        (PluginKind::Limiter, Some("reject")) => false,
        (PluginKind::Limiter, Some(other)) => {
            return Err((
                key("on-error"),
                format!("must be \"admit\" or \"reject\" (got {other:?})"),
            ))
        }
        (PluginKind::Interceptor, Some("pass")) => true,
        (PluginKind::Interceptor, Some("refuse")) => false,
        (PluginKind::Interceptor, Some(other)) => {
            return Err((
                key("on-error"),
                format!("must be \"pass\" or \"refuse\" (got {other:?})"),
            ))
        }
        (kind, Some(_)) => {
            return Err((
                key("on-error"),
                format!(
                    "only limiters and interceptors take on-error; a {kind}'s safe default is fixed"
                ),
            ))
        }
    };
    let grant_payload = match (p.kind, p.grant_payload) {
        (_, None) => false,
        (PluginKind::Interceptor, Some(grant)) => grant,
        (kind, Some(_)) => {
            return Err((
                key("grant-payload"),
                format!("only interceptors take grant-payload, not a {kind}"),
            ))
        }
    };
    let key_on = match (p.kind, p.key_on) {
        (_, None) => KeyOn::default(),
        (PluginKind::Limiter, Some(parts)) => {
            let mut key_on = KeyOn {
                consumer_app: false,
                consumer_ip: false,
            };
            for part in &parts {
                match part.as_str() {
                    "consumer-app" => key_on.consumer_app = true,
                    "consumer-ip" => key_on.consumer_ip = true,
                    other => {
                        return Err((
                            key("key-on"),
                            format!(
                                "unknown `{other}`: a key is the method plus any of \
                                 \"consumer-app\", \"consumer-ip\""
                            ),
                        ))
                    }
                }
            }
            key_on
        }
        (kind, Some(_)) => {
            return Err((
                key("key-on"),
                format!("only limiters take key-on, not a {kind}"),
            ))
        }
    };
    // Quotas per consumer application (`sliding-window`'s `quotas`) can only work on keys
    // that carry the application's name; without it every app shares one key and the
    // quotas would silently never apply.
    if p.kind == PluginKind::Limiter && p.config.contains_key("quotas") && !key_on.consumer_app {
        return Err((
            key("key-on"),
            "config `quotas` counts per consumer application: key-on must include \
             \"consumer-app\" (e.g. key-on = [\"consumer-app\"])"
                .into(),
        ));
    }
    let slow_call_us = p.slow_call_us.unwrap_or(0);
    if slow_call_us > timeout_ms * 1000 {
        return Err((
            key("slow-call-us"),
            format!("{slow_call_us} µs is past the call deadline ({timeout_ms} ms): no call can be that slow"),
        ));
    }
    if p.quarantine_slow && slow_call_us == 0 {
        return Err((
            key("quarantine-slow"),
            "needs slow-call-us: the budget a call is slow past".into(),
        ));
    }
    Ok(PluginSpec {
        name,
        kind: p.kind,
        component,
        timeout_ms,
        memory_bytes: memory_mib * 1024 * 1024,
        instances,
        on_error_admit,
        grant_payload,
        key_on,
        slow_call_us,
        quarantine_slow: p.quarantine_slow,
        config: p.config,
    })
}
