//! `[gateway]` and `[sidecar]`: how `axle gateway` and `axle sidecar` put HTTP in front
//! of Axle services (`docs/gateway.md`). Kept apart from the other tables: the HTTP face
//! is an edge concern, and nothing below the gateway reads these keys. Unknown keys are
//! refused like everywhere else in the manifest.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::KeyError;

/// Largest request body the gateway reads when `max-body-bytes` is not set (1 MiB).
pub const GATEWAY_MAX_BODY_BYTES: usize = 1 << 20;
/// How long a client may take to send its request headers (`header-read-timeout-ms`).
pub const GATEWAY_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send its request body (`body-read-timeout-ms`).
pub const GATEWAY_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most an `x-axle-timeout-ms` header may ask for (`max-timeout-ms`).
pub const GATEWAY_MAX_TIMEOUT: Duration = Duration::from_secs(30);
/// The path the sidecar polls until the application answers (`health-path`).
pub const SIDECAR_HEALTH_PATH: &str = "/health";
/// How long the sidecar waits for the application's health URL (`ready-timeout-ms`).
pub const SIDECAR_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `[gateway]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewaySpec {
    /// Where `axle gateway` listens (`--listen` overrides).
    pub listen: Option<String>,
    /// Bodies larger than this are answered 413 without being read further.
    pub max_body_bytes: usize,
    /// A client that has not sent its headers by then is disconnected.
    pub header_read_timeout: Duration,
    /// A client that has not sent its whole body by then is answered 408.
    pub body_read_timeout: Duration,
    /// The cap on `x-axle-timeout-ms` for `POST /{service}/{method}` (a route has its own).
    pub max_timeout: Duration,
    /// `[gateway.routes]`: HTTP method and path → service/method, in file order.
    pub routes: Vec<GatewayRoute>,
}

impl Default for GatewaySpec {
    fn default() -> Self {
        GatewaySpec {
            listen: None,
            max_body_bytes: GATEWAY_MAX_BODY_BYTES,
            header_read_timeout: GATEWAY_HEADER_READ_TIMEOUT,
            body_read_timeout: GATEWAY_BODY_READ_TIMEOUT,
            max_timeout: GATEWAY_MAX_TIMEOUT,
            routes: Vec::new(),
        }
    }
}

/// One `[gateway.routes]` entry: `"GET /users/{id}" = { call = "users/get" }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayRoute {
    /// `GET`, `POST`, ... (upper case).
    pub http_method: String,
    /// `/users/{id}`: literal segments and `{name}` parameters.
    pub path: String,
    pub service: String,
    pub method: String,
    /// The cap on `x-axle-timeout-ms` for this route (default: the gateway's).
    pub max_timeout: Duration,
}

/// `[sidecar]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SidecarSpec {
    /// The application's base URL (`--app` overrides).
    pub app: Option<String>,
    /// Where the consumer side listens for the application (`--local` overrides).
    pub local: Option<String>,
    /// The path polled until the application answers 2xx (default `/health`).
    pub health_path: String,
    /// How long to wait for it before giving up.
    pub ready_timeout: Duration,
    /// `[sidecar.provides.<service>]`: the services the application provides; an empty
    /// method list means any method.
    pub provides: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawGateway {
    listen: Option<String>,
    max_body_bytes: Option<u64>,
    header_read_timeout_ms: Option<u64>,
    body_read_timeout_ms: Option<u64>,
    max_timeout_ms: Option<u64>,
    #[serde(default)]
    routes: toml::Table,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRoute {
    Call(String),
    Full(RawRouteTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRouteTable {
    call: String,
    max_timeout_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawSidecar {
    app: Option<String>,
    local: Option<String>,
    health_path: Option<String>,
    ready_timeout_ms: Option<u64>,
    #[serde(default)]
    provides: BTreeMap<String, RawProvided>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawProvided {
    #[serde(default)]
    methods: Vec<String>,
}

/// `v` within `lo..=hi`, else an error naming `key`.
fn within(key: &str, v: Option<u64>, lo: u64, hi: u64, default: u64) -> Result<u64, KeyError> {
    match v {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        Some(v) => Err((
            key.to_string(),
            format!("must be between {lo} and {hi} (got {v})"),
        )),
    }
}

fn ms(
    key: &str,
    v: Option<u64>,
    lo: u64,
    hi: u64,
    default: Duration,
) -> Result<Duration, KeyError> {
    within(key, v, lo, hi, default.as_millis() as u64).map(Duration::from_millis)
}

/// Splits `service/method`, checking both names.
fn target(key: &str, call: &str) -> Result<(String, String), KeyError> {
    let bad = |reason: String| (key.to_string(), reason);
    let (service, method) = call
        .split_once('/')
        .ok_or_else(|| bad(format!("`{call}` is not service/method")))?;
    axle_core::validate::name("service", service).map_err(bad)?;
    axle_core::validate::name("method", method).map_err(bad)?;
    Ok((service.to_string(), method.to_string()))
}

/// Checks a route path: absolute, segments literal or `{name}`, each name once.
fn check_path(key: &str, path: &str) -> Result<(), KeyError> {
    let bad = |reason: String| (key.to_string(), reason);
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| bad(format!("the path `{path}` must start with `/`")))?;
    let mut names = Vec::new();
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Err(bad(format!("the path `{path}` has an empty segment")));
        }
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let ok = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Err(bad(format!(
                        "`{segment}`: a parameter is {{name}} (letters, digits, _ and -)"
                    )));
                }
                if names.contains(&name) {
                    return Err(bad(format!("parameter `{name}` appears twice")));
                }
                names.push(name);
            }
            None if segment.contains(['{', '}']) => {
                return Err(bad(format!(
                    "`{segment}`: a parameter is a whole segment, {{name}}"
                )))
            }
            None => {}
        }
    }
    Ok(())
}

const HTTP_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

pub(crate) fn gateway(raw: RawGateway) -> Result<GatewaySpec, KeyError> {
    let d = GatewaySpec::default();
    let max_timeout = ms(
        "gateway.max-timeout-ms",
        raw.max_timeout_ms,
        1,
        3_600_000,
        d.max_timeout,
    )?;
    let mut routes: Vec<GatewayRoute> = Vec::new();
    for (spec, value) in raw.routes {
        let key = format!("gateway.routes.\"{spec}\"");
        let (http_method, path) = spec
            .split_once(' ')
            .ok_or_else(|| (key.clone(), "a route is \"METHOD /path\"".to_string()))?;
        if !HTTP_METHODS.contains(&http_method) {
            return Err((
                key,
                format!("`{http_method}` is not one of {HTTP_METHODS:?}"),
            ));
        }
        check_path(&key, path)?;
        let raw: RawRoute = value.try_into().map_err(|e: toml::de::Error| {
            (
                key.clone(),
                format!("a route is \"service/method\" or {{ call = \"service/method\", max-timeout-ms = N }}: {}", e.message()),
            )
        })?;
        let (call, route_timeout) = match raw {
            RawRoute::Call(call) => (call, None),
            RawRoute::Full(t) => (t.call, t.max_timeout_ms),
        };
        let (service, method) = target(&format!("{key}.call"), &call)?;
        let shape = |p: &str| {
            p.split('/')
                .map(|s| if s.starts_with('{') { "{}" } else { s })
                .collect::<Vec<_>>()
                .join("/")
        };
        if let Some(other) = routes
            .iter()
            .find(|r| r.http_method == http_method && shape(&r.path) == shape(path))
        {
            return Err((
                key,
                format!(
                    "matches the same requests as \"{} {}\"",
                    other.http_method, other.path
                ),
            ));
        }
        routes.push(GatewayRoute {
            http_method: http_method.to_string(),
            path: path.to_string(),
            service,
            method,
            max_timeout: ms(
                &format!("{key}.max-timeout-ms"),
                route_timeout,
                1,
                3_600_000,
                max_timeout,
            )?,
        });
    }
    Ok(GatewaySpec {
        listen: raw.listen,
        max_body_bytes: within(
            "gateway.max-body-bytes",
            raw.max_body_bytes,
            1,
            64 << 20,
            d.max_body_bytes as u64,
        )? as usize,
        header_read_timeout: ms(
            "gateway.header-read-timeout-ms",
            raw.header_read_timeout_ms,
            10,
            600_000,
            d.header_read_timeout,
        )?,
        body_read_timeout: ms(
            "gateway.body-read-timeout-ms",
            raw.body_read_timeout_ms,
            10,
            600_000,
            d.body_read_timeout,
        )?,
        max_timeout,
        routes,
    })
}

pub(crate) fn sidecar(raw: RawSidecar) -> Result<SidecarSpec, KeyError> {
    let health_path = raw
        .health_path
        .unwrap_or_else(|| SIDECAR_HEALTH_PATH.to_string());
    if !health_path.starts_with('/') {
        return Err((
            "sidecar.health-path".into(),
            format!("`{health_path}` must start with `/`"),
        ));
    }
    let mut provides = BTreeMap::new();
    for (service, p) in raw.provides {
        let key = format!("sidecar.provides.{service}");
        axle_core::validate::name("service", &service).map_err(|r| (key.clone(), r))?;
        for m in &p.methods {
            axle_core::validate::name("method", m).map_err(|r| (format!("{key}.methods"), r))?;
        }
        provides.insert(service, p.methods);
    }
    Ok(SidecarSpec {
        app: raw.app,
        local: raw.local,
        health_path,
        ready_timeout: ms(
            "sidecar.ready-timeout-ms",
            raw.ready_timeout_ms,
            1,
            3_600_000,
            SIDECAR_READY_TIMEOUT,
        )?,
        provides,
    })
}

#[cfg(test)]
mod tests {
    use crate::Manifest;
    use std::path::Path;
    use std::time::Duration;

    fn parse(text: &str) -> Result<Manifest, String> {
        Manifest::parse(text, "m.toml", Path::new("/")).map_err(|e| e.to_string())
    }

    #[test]
    fn routes_keys_and_defaults() {
        let m = parse(
            "[gateway]\nmax-body-bytes = 2048\n[gateway.routes]\n\"GET /kv/{key}\" = \"kv/get\"\n\"PUT /kv/{key}\" = { call = \"kv/put\", max-timeout-ms = 50 }\n",
        )
        .unwrap();
        assert_eq!(m.gateway.max_body_bytes, 2048);
        assert_eq!(m.gateway.max_timeout, super::GATEWAY_MAX_TIMEOUT);
        let r: Vec<_> = m
            .gateway
            .routes
            .iter()
            .map(|r| {
                (
                    r.http_method.as_str(),
                    r.path.as_str(),
                    r.service.as_str(),
                    r.method.as_str(),
                    r.max_timeout,
                )
            })
            .collect();
        assert_eq!(
            r,
            [
                ("GET", "/kv/{key}", "kv", "get", super::GATEWAY_MAX_TIMEOUT),
                ("PUT", "/kv/{key}", "kv", "put", Duration::from_millis(50)),
            ]
        );
        assert_eq!(parse("").unwrap().gateway, super::GatewaySpec::default());
    }

    #[test]
    fn bad_gateway_keys_are_refused_by_name() {
        for (text, needle) in [
            (
                "[gateway]\nlisten-on = \"x\"\n",
                "unknown field `listen-on`",
            ),
            ("[gateway]\nmax-body-bytes = 0\n", "gateway.max-body-bytes"),
            (
                "[gateway.routes]\n\"GET kv\" = \"kv/get\"\n",
                "must start with `/`",
            ),
            (
                "[gateway.routes]\n\"FETCH /kv\" = \"kv/get\"\n",
                "`FETCH` is not one of",
            ),
            (
                "[gateway.routes]\n\"GET /kv/{k}\" = \"kvget\"\n",
                "is not service/method",
            ),
            (
                "[gateway.routes]\n\"GET /kv/{k}/{k}\" = \"kv/get\"\n",
                "appears twice",
            ),
            (
                "[gateway.routes]\n\"GET /kv/a{k}\" = \"kv/get\"\n",
                "whole segment",
            ),
            (
                "[gateway.routes]\n\"GET /kv\" = { call = \"kv/get\", retries = 2 }\n",
                "gateway.routes.\"GET /kv\"",
            ),
            (
                "[gateway.routes]\n\"GET /kv/{a}\" = \"kv/get\"\n\"GET /kv/{b}\" = \"kv/put\"\n",
                "matches the same requests",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn sidecar_provides_and_refusals() {
        let m = parse("[sidecar]\nhealth-path = \"/ready\"\n[sidecar.provides.greeter]\nmethods = [\"hello\"]\n[sidecar.provides.kv]\n").unwrap();
        assert_eq!(m.sidecar.health_path, "/ready");
        assert_eq!(m.sidecar.provides["greeter"], ["hello"]);
        assert!(m.sidecar.provides["kv"].is_empty());
        for (text, needle) in [
            (
                "[sidecar]\nhealth-path = \"ready\"\n",
                "sidecar.health-path",
            ),
            (
                "[sidecar.provides.greeter]\nmethod = [\"x\"]\n",
                "unknown field `method`",
            ),
            ("[sidecar]\nports = 1\n", "unknown field `ports`"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
