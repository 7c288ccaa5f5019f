//! Every key of the manifest, described once: its type and what it means. `axle config
//! schema` prints it as a JSON Schema (`docs/manifest.schema.json`) for editors and CI.
//! A test holds it to the serde structs that actually read the manifest (the keys each
//! table refuses to be without are the keys described here), so it cannot drift.

use serde_json::{json, Map, Value};

/// The type of a value.
pub enum Ty {
    Str,
    Int,
    Num,
    Bool,
    /// Anything (a plugin's config, a fallback's value).
    Any,
    /// One of these strings.
    Enum(&'static [&'static str]),
    Array(Box<Ty>),
    /// A table of exactly these keys.
    Table(Vec<Field>),
    /// A table of names the user chooses, each holding this.
    Map(Box<Ty>),
    OneOf(Vec<Ty>),
}

/// One key of a table.
pub struct Field {
    pub key: &'static str,
    pub ty: Ty,
    pub doc: String,
    pub required: bool,
}

fn f(key: &'static str, ty: Ty, doc: &str) -> Field {
    Field {
        key,
        ty,
        doc: doc.to_string(),
        required: false,
    }
}

fn required(key: &'static str, ty: Ty, doc: &str) -> Field {
    Field {
        required: true,
        ..f(key, ty, doc)
    }
}

fn array(ty: Ty) -> Ty {
    Ty::Array(Box::new(ty))
}

fn map(ty: Ty) -> Ty {
    Ty::Map(Box::new(ty))
}

/// The whole manifest.
pub fn manifest() -> Ty {
    use Ty::*;
    Table(vec![
        f("extends", Str, "another manifest this one is laid over (relative to this file); the embedded defaults lie under both"),
        f("governance", governance(), "the global governance tier"),
        f("serve", serve(), "how `axle serve` runs"),
        f("slots", slots(), "which plugin fills each slot by default"),
        f("plugins", map(plugin()), "the plugins, by name"),
        f("services", map(service()), "per service: endpoints, slots, governance, discovery groups"),
        f("discovery", discovery(), "where consumers find providers and where `axle serve` registers"),
        f("tls", tls(), "TLS on the wire (plain TCP when absent)"),
        f("trust", Table(vec![
            f("internal-networks", array(Str), "peers in these ranges are internal"),
            f("identities", array(Str), "peers whose verified certificate names one of these are internal"),
        ]), "who a provider trusts (nobody by default)"),
        f("gateway", gateway(), "`axle gateway`: HTTP in front of Axle services"),
        f("sidecar", sidecar(), "`axle sidecar`: an HTTP application as an Axle provider and consumer"),
    ])
}

/// A governance tier, from the keys `axle-governance` declares.
fn governance() -> Ty {
    let mut fields: Vec<Field> = axle_governance::KEYS
        .iter()
        .map(|(key, ty, doc)| {
            let ty = match *ty {
                "bool" => Ty::Bool,
                "f64" | "f32" => Ty::Num,
                "String" => Ty::Str,
                "u32" | "u64" => Ty::Int,
                "Codes" => Ty::Array(Box::new(Ty::Str)),
                // A new key type must be mapped here: the schema test fails until it is.
                other => panic!("governance key `{key}` has type `{other}`, unmapped"),
            };
            f(key, ty, doc.trim())
        })
        .collect();
    fields.push(f(
        "fallback",
        Ty::OneOf(vec![
            Ty::Table(vec![required("value", Ty::Any, "answered as is")]),
            Ty::Table(vec![required(
                "call",
                Ty::Str,
                "`service/method` called with the same request",
            )]),
        ]),
        "what a call answers when it finally fails",
    ));
    Ty::Table(fields)
}

fn serve() -> Ty {
    use Ty::*;
    Table(vec![
        f(
            "listen",
            Str,
            "where `axle serve` listens (`--listen` overrides)",
        ),
        f("max-connections", Int, "connections held open at once"),
        f(
            "idle-timeout-ms",
            Int,
            "a connection idle this long is closed",
        ),
        f(
            "frame-timeout-ms",
            Int,
            "a started frame must finish within this",
        ),
        f(
            "max-requests-per-connection",
            Int,
            "requests in flight on one connection",
        ),
        f(
            "max-buffered-bytes",
            Int,
            "request payload bytes in flight on one connection",
        ),
        f(
            "flaky",
            Table(vec![
                f("latency-ms", Num, "base latency of every request"),
                f("jitter-ms", Num, "uniform extra latency"),
                f("slow-rate", Num, "share of requests that take slow-ms more"),
                f("slow-ms", Num, "the slow tail's extra latency"),
                f(
                    "fail-rate",
                    Num,
                    "share of requests that fail with `internal`",
                ),
                f("timeout-rate", Num, "share of requests that never answer"),
            ]),
            "the demo `flaky` service's behaviour",
        ),
    ])
}

fn slots() -> Ty {
    use Ty::*;
    let empty = "; an empty name leaves the slot empty";
    Table(vec![
        f("serializer", Str, &format!("a serializer plugin{empty}")),
        f("selector", Str, &format!("a selector plugin{empty}")),
        f("routers", array(Str), "router plugins, applied in order"),
        f(
            "health-scorer",
            Str,
            &format!("a health-scorer plugin{empty}"),
        ),
        f(
            "limiter",
            Str,
            &format!("a limiter plugin (used by `axle serve`){empty}"),
        ),
        f(
            "client-interceptors",
            array(Str),
            "interceptor plugins on the caller, in chain order",
        ),
        f(
            "server-interceptors",
            array(Str),
            "interceptor plugins on the provider (used by `axle serve`), in chain order",
        ),
        f(
            "shadow-selector",
            Str,
            "a selector deciding beside the live one on sampled calls, its answer never used (docs/shadow.md)",
        ),
        f(
            "shadow-routers",
            array(Str),
            "a router chain run beside the live one on sampled calls, its answer never used",
        ),
        f(
            "shadow-limiter",
            Str,
            "a limiter asked beside the live one on sampled requests ([slots] only; `axle serve`)",
        ),
        f(
            "shadow-sample",
            Num,
            "the share of calls the shadows decide on, 0 to 1 (default 0.01)",
        ),
    ])
}

fn plugin() -> Ty {
    use Ty::*;
    Table(vec![
        required(
            "kind",
            Enum(&[
                "serializer",
                "selector",
                "router",
                "health-scorer",
                "limiter",
                "interceptor",
            ]),
            "the WIT world the component implements",
        ),
        required(
            "component",
            Str,
            "`builtin:<name>` or a path to a .wasm component, relative to the manifest",
        ),
        f(
            "timeout-ms",
            Int,
            "longest one call into the plugin may run",
        ),
        f(
            "memory-mib",
            Int,
            "most linear memory one instance may grow to",
        ),
        f("instances", Int, "instances serving calls"),
        f(
            "on-error",
            Enum(&["admit", "reject", "pass", "refuse"]),
            "limiters (admit, reject) and interceptors (pass, refuse): what a failing plugin answers",
        ),
        f(
            "grant-payload",
            Bool,
            "interceptors only: may read request payloads",
        ),
        f(
            "key-on",
            array(Enum(&["consumer-ip", "consumer-app"])),
            "limiters only: identities a key includes besides the method",
        ),
        f(
            "slow-call-us",
            Int,
            "a call slower than this is counted and logged; 0 = not timed",
        ),
        f(
            "quarantine-slow",
            Bool,
            "slow calls count toward quarantine",
        ),
        f("config", map(Any), "handed to the plugin's init"),
    ])
}

fn service() -> Ty {
    use Ty::*;
    let endpoint = OneOf(vec![
        Str,
        Table(vec![
            required("address", Str, "host:port"),
            f("weight", Int, "relative share of calls (default 100)"),
            f(
                "tags",
                map(Str),
                "routing tags (`group` places it in a group)",
            ),
        ]),
    ]);
    Table(vec![
        f(
            "endpoints",
            array(endpoint),
            "providers: \"host:port\" or { address, weight, tags }",
        ),
        f(
            "slots",
            slots(),
            "this service's slots (override the defaults slot by slot)",
        ),
        f("governance", governance(), "the service governance tier"),
        f(
            "weights",
            map(Int),
            "\"host:port\" = weight: overrides what discovery says (1..=1000000)",
        ),
        f(
            "methods",
            map(governance()),
            "the method governance tier; an empty table declares a method",
        ),
        f(
            "discovery",
            Table(vec![
                f("group", Str, "the group of this service's providers"),
                f(
                    "secondary-group",
                    Str,
                    "used only while `group` has no admissible endpoint",
                ),
            ]),
            "this service's own groups",
        ),
    ])
}

fn discovery() -> Ty {
    use Ty::*;
    Table(vec![
        f(
            "registry",
            Str,
            "`static`, `file:PATH` or `etcd://HOST:PORT[,HOST:PORT]`",
        ),
        f("namespace", Str, "the environment: a separate key space"),
        f(
            "group",
            Str,
            "the group providers register in and consumers use first",
        ),
        f("secondary-group", Str, "consumers' fallback group"),
        f("lease-ttl-s", Int, "etcd lease of a registration"),
        f(
            "resync-ms",
            Int,
            "consumers re-list this often besides watching",
        ),
        f(
            "file-poll-ms",
            Int,
            "how often a `file:` registry is checked",
        ),
        f(
            "warmup-ms",
            Int,
            "a new provider's weight ramps up over this",
        ),
        f(
            "ready-timeout-ms",
            Int,
            "how long `axle serve` waits for readiness",
        ),
        f(
            "etcd",
            Table(vec![
                f("user", Str, "the etcd user"),
                f("password-file", Str, "a file holding the password"),
                f(
                    "password-env",
                    Str,
                    "an environment variable holding the password",
                ),
                f(
                    "ca-file",
                    Str,
                    "trust roots for etcd's certificate (TLS when set)",
                ),
                f("cert-file", Str, "a client certificate (PEM)"),
                f("key-file", Str, "its key (PEM)"),
                f("server-name", Str, "the name etcd's certificate must carry"),
                f(
                    "allowed-networks",
                    array(Str),
                    "only providers in these ranges are dialled",
                ),
                f("max-instances", Int, "providers kept per service and group"),
                f("max-value-bytes", Int, "the largest registry value parsed"),
                f("max-tags", Int, "tags per provider"),
                f("max-tag-bytes", Int, "the longest tag key or value"),
            ]),
            "how etcd is reached and what is accepted from it",
        ),
    ])
}

fn tls() -> Ty {
    use Ty::*;
    Table(vec![
        f(
            "cert-file",
            Str,
            "provider: serve TLS with this chain (PEM)",
        ),
        f("key-file", Str, "provider: and this key (PEM)"),
        f(
            "client-ca-file",
            Str,
            "provider: require client certificates from this CA (mTLS)",
        ),
        f(
            "ca-file",
            Str,
            "caller: dial TLS, trusting providers from this CA",
        ),
        f(
            "server-name",
            Str,
            "caller: the name verified in providers' certificates",
        ),
        f("client-cert-file", Str, "caller: its certificate, for mTLS"),
        f("client-key-file", Str, "caller: its key, for mTLS"),
    ])
}

fn gateway() -> Ty {
    use Ty::*;
    let route = OneOf(vec![
        Str,
        Table(vec![
            required("call", Str, "`service/method`"),
            f(
                "max-timeout-ms",
                Int,
                "this route's cap on x-axle-timeout-ms",
            ),
        ]),
    ]);
    Table(vec![
        f("listen", Str, "where `axle gateway` listens"),
        f("max-body-bytes", Int, "larger bodies are answered 413"),
        f(
            "header-read-timeout-ms",
            Int,
            "a client must send its headers within this",
        ),
        f(
            "body-read-timeout-ms",
            Int,
            "a client must send its body within this",
        ),
        f("max-timeout-ms", Int, "the cap on x-axle-timeout-ms"),
        f(
            "routes",
            map(route),
            "\"METHOD /path/{param}\" → service/method",
        ),
    ])
}

fn sidecar() -> Ty {
    use Ty::*;
    Table(vec![
        f("app", Str, "the application's base URL"),
        f(
            "local",
            Str,
            "where the consumer side listens for the application",
        ),
        f(
            "health-path",
            Str,
            "the path polled until the application answers",
        ),
        f("ready-timeout-ms", Int, "how long to wait for it"),
        f(
            "provides",
            map(Table(vec![f(
                "methods",
                array(Str),
                "its methods; empty: any",
            )])),
            "the services the application provides",
        ),
    ])
}

/// The manifest's JSON Schema, pretty-printed (what `axle config schema` prints).
pub fn json_schema() -> String {
    let mut root = Map::new();
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    root.insert("title".into(), json!("Axle manifest (plugins.toml)"));
    root.insert(
        "description".into(),
        json!("Laid over the embedded defaults: every key is optional unless marked required. Generated by `axle config schema`."),
    );
    if let Value::Object(table) = to_json(&manifest()) {
        root.extend(table);
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    text
}

fn to_json(ty: &Ty) -> Value {
    match ty {
        Ty::Str => json!({ "type": "string" }),
        Ty::Int => json!({ "type": "integer" }),
        Ty::Num => json!({ "type": "number" }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Any => json!({}),
        Ty::Enum(values) => json!({ "enum": values }),
        Ty::Array(item) => json!({ "type": "array", "items": to_json(item) }),
        Ty::Map(item) => json!({ "type": "object", "additionalProperties": to_json(item) }),
        Ty::OneOf(options) => json!({ "oneOf": options.iter().map(to_json).collect::<Vec<_>>() }),
        Ty::Table(fields) => {
            let mut properties = Map::new();
            for field in fields {
                let mut schema = to_json(&field.ty);
                if let Value::Object(o) = &mut schema {
                    o.insert("description".into(), json!(field.doc));
                }
                properties.insert(field.key.into(), schema);
            }
            let required: Vec<&str> = fields
                .iter()
                .filter(|f| f.required)
                .map(|f| f.key)
                .collect();
            let mut table = json!({
                "type": "object",
                "properties": properties,
                "additionalProperties": false,
            });
            if !required.is_empty() {
                table["required"] = json!(required);
            }
            table
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
