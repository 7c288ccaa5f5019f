//! Which Axle method an HTTP request calls: the manifest's `[gateway.routes]` first
//! (`GET /users/{id}` → `users/get`, path parameters kept for the request object), then
//! `POST /{service}/{method}` for any service the gateway knows. Matching is a walk over
//! path segments: routes are few, and a table the manifest validated cannot conflict.

use std::collections::BTreeSet;
use std::time::Duration;

use axle::manifest::GatewayRoute;

/// What a request resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub service: String,
    pub method: String,
    /// Path parameters, merged into the JSON request object.
    pub params: Vec<(String, String)>,
    /// The most `x-axle-timeout-ms` may ask for.
    pub max_timeout: Duration,
}

/// Why nothing matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    /// No route has this path (404).
    NoRoute,
    /// A route has this path, but for other HTTP methods (405).
    WrongMethod { allowed: Vec<String> },
}

/// The routes of one gateway.
#[derive(Clone, Debug)]
pub struct Routes {
    routes: Vec<GatewayRoute>,
    /// Services `POST /{service}/{method}` may reach.
    services: BTreeSet<String>,
    max_timeout: Duration,
}

impl Routes {
    pub fn new(
        routes: Vec<GatewayRoute>,
        services: BTreeSet<String>,
        max_timeout: Duration,
    ) -> Routes {
        Routes {
            routes,
            services,
            max_timeout,
        }
    }

    /// The target of `http_method path` (path without the query).
    pub fn find(&self, http_method: &str, path: &str) -> Result<Target, Miss> {
        let mut allowed = Vec::new();
        for route in &self.routes {
            let Some(params) = match_path(&route.path, path) else {
                continue;
            };
            if route.http_method != http_method {
                allowed.push(route.http_method.clone());
                continue;
            }
            return Ok(Target {
                service: route.service.clone(),
                method: route.method.clone(),
                params,
                max_timeout: route.max_timeout,
            });
        }
        let generic = path
            .strip_prefix('/')
            .and_then(|p| p.split_once('/'))
            .filter(|(s, m)| !m.contains('/') && self.services.contains(*s) && !m.is_empty());
        match generic {
            Some(_) if http_method != "POST" => allowed.push("POST".into()),
            Some((service, method)) => {
                return Ok(Target {
                    service: service.to_string(),
                    method: method.to_string(),
                    params: Vec::new(),
                    max_timeout: self.max_timeout,
                })
            }
            None => {}
        }
        if allowed.is_empty() {
            Err(Miss::NoRoute)
        } else {
            Err(Miss::WrongMethod { allowed })
        }
    }
}

/// The parameters of `path` under `pattern`, if it matches segment by segment.
fn match_path(pattern: &str, path: &str) -> Option<Vec<(String, String)>> {
    let mut pattern_segments = pattern.split('/');
    let mut path_segments = path.split('/');
    let mut params = Vec::new();
    loop {
        match (pattern_segments.next(), path_segments.next()) {
            (None, None) => return Some(params),
            (Some(p), Some(s)) => match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) if !s.is_empty() => params.push((name.to_string(), percent_decode(s)?)),
                Some(_) => return None,
                None if p == s => {}
                None => return None,
            },
            _ => return None,
        }
    }
}

/// `%41` → `A`; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(http_method: &str, path: &str, call: &str, ms: u64) -> GatewayRoute {
        let (service, method) = call.split_once('/').unwrap();
        GatewayRoute {
            http_method: http_method.into(),
            path: path.into(),
            service: service.into(),
            method: method.into(),
            max_timeout: Duration::from_millis(ms),
        }
    }

    fn routes() -> Routes {
        Routes::new(
            vec![
                route("GET", "/kv/{key}", "kv/get", 50),
                route("PUT", "/kv/{key}", "kv/put", 60),
                route("GET", "/health", "echo/ping", 70),
            ],
            ["echo".to_string(), "kv".to_string()].into(),
            Duration::from_millis(1000),
        )
    }

    #[test]
    fn routes_bind_parameters_and_caps() {
        let t = routes().find("GET", "/kv/a%20b").unwrap();
        assert_eq!((t.service.as_str(), t.method.as_str()), ("kv", "get"));
        assert_eq!(t.params, [("key".to_string(), "a b".to_string())]);
        assert_eq!(t.max_timeout, Duration::from_millis(50));
        assert_eq!(routes().find("PUT", "/kv/x").unwrap().method, "put");
        assert_eq!(routes().find("GET", "/health").unwrap().method, "ping");
    }

    #[test]
    fn post_service_method_reaches_known_services_only() {
        let t = routes().find("POST", "/echo/say").unwrap();
        assert_eq!((t.service.as_str(), t.method.as_str()), ("echo", "say"));
        assert!(t.params.is_empty());
        assert_eq!(t.max_timeout, Duration::from_millis(1000));
        for (m, p) in [
            ("POST", "/nope/x"),
            ("POST", "/echo/"),
            ("POST", "/echo/a/b"),
            ("POST", "/"),
            ("GET", "/kv/"),
            ("GET", "/kv/a/b"),
            ("GET", "/kv/a/%zz"),
        ] {
            assert_eq!(routes().find(m, p), Err(Miss::NoRoute), "{m} {p}");
        }
    }

    #[test]
    fn a_known_path_with_another_method_is_405() {
        assert_eq!(
            routes().find("DELETE", "/kv/a"),
            Err(Miss::WrongMethod {
                allowed: vec!["GET".into(), "PUT".into(), "POST".into()]
            })
        );
        assert_eq!(
            routes().find("GET", "/echo/say"),
            Err(Miss::WrongMethod {
                allowed: vec!["POST".into()]
            })
        );
    }
}
