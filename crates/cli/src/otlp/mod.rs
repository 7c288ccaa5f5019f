//! Exporting the `call`, `attempt` and `handler` spans over OTLP/HTTP with JSON encoding,
//! to a collector (an OpenTelemetry collector, Jaeger, Tempo). Compiled only with the
//! `otel` feature; without it the flag is refused, so nobody believes spans are exported
//! when they are not. With no endpoint nothing is installed: not a layer, not a thread.

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod json;
#[cfg(feature = "otel")]
mod layer;

use tracing_subscriber::{Layer, Registry};

/// The standard variables, read when the flags are absent.
const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const SERVICE_ENV: &str = "OTEL_SERVICE_NAME";

/// A layer added beside the log output.
pub type SpanLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The OTLP flags, global so every command that makes or serves calls has them.
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// Export the call, attempt and handler spans as OTLP/HTTP JSON to this collector
    /// (`http://HOST:PORT`, `/v1/traces` appended); default OTEL_EXPORTER_OTLP_ENDPOINT.
    /// Needs an axle built with `--features otel`.
    #[arg(long, global = true, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of exported spans; default OTEL_SERVICE_NAME, else `axle`.
    #[arg(long, global = true, value_name = "NAME")]
    pub otlp_service_name: Option<String>,
}

/// What `start` set up: the layer for the subscriber, the exporter to keep until exit
/// (dropping it sends what is left), and a warning to log once logging is up.
#[derive(Default)]
pub struct Setup {
    pub layer: Option<SpanLayer>,
    pub exporter: Option<Exporter>,
    pub notice: Option<String>,
}

#[cfg(feature = "otel")]
pub use export::Exporter;

/// Without the feature there is never an exporter to keep.
#[cfg(not(feature = "otel"))]
pub struct Exporter;

/// Where to export, and whether the flag (not the variable) said so.
fn endpoint(args: &Args, var: &impl Fn(&str) -> Option<String>) -> Option<(String, bool)> {
    match &args.otlp_endpoint {
        Some(flag) => Some((flag.clone(), true)),
        None => var(ENDPOINT_ENV)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (v, false)),
    }
}

/// The resource's `service.name`.
fn service_name(args: &Args, var: &impl Fn(&str) -> Option<String>) -> String {
    args.otlp_service_name
        .clone()
        .or_else(|| var(SERVICE_ENV))
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "axle".to_string())
}

/// A binary without the feature: the flag is an error (the user asked for spans they
/// would not get); the variable, which may be set for every program on the machine, a
/// warning.
fn refuse(endpoint: &str, from_flag: bool) -> anyhow::Result<Setup> {
    let why = "this axle was built without the `otel` feature (cargo build --release -p axle-cli --features otel)";
    if from_flag {
        anyhow::bail!("--otlp-endpoint {endpoint}: {why}");
    }
    Ok(Setup {
        notice: Some(format!("{ENDPOINT_ENV}={endpoint} is ignored: {why}")),
        ..Setup::default()
    })
}

/// Reads the flags and variables; with an endpoint (and the feature), starts the exporter.
pub fn start(args: &Args) -> anyhow::Result<Setup> {
    start_with(
        args,
        |name| std::env::var(name).ok(),
        cfg!(feature = "otel"),
    )
}

fn start_with(
    args: &Args,
    var: impl Fn(&str) -> Option<String>,
    compiled: bool,
) -> anyhow::Result<Setup> {
    let Some((url, from_flag)) = endpoint(args, &var) else {
        return Ok(Setup::default());
    };
    if !compiled {
        return refuse(&url, from_flag);
    }
    build(&url, service_name(args, &var))
}

/// The layer and its exporter thread.
#[cfg(feature = "otel")]
fn build(url: &str, service: String) -> anyhow::Result<Setup> {
    let target = export::Target::parse(url)?;
    let (layer, exporter) = export::start(target, service)?;
    Ok(Setup {
        layer: Some(layer),
        exporter: Some(exporter),
        notice: None,
    })
}

/// Without the feature there is nothing to build: the flag's refusal.
#[cfg(not(feature = "otel"))]
fn build(url: &str, _service: String) -> anyhow::Result<Setup> {
    refuse(url, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn without_the_feature_the_flag_is_refused_and_the_variable_only_warned_about() {
        let flag = Args {
            otlp_endpoint: Some("http://127.0.0.1:4318".into()),
            ..Args::default()
        };
        let e = start_with(&flag, env(&[]), false).err().unwrap();
        assert!(e.to_string().contains("without the `otel` feature"), "{e}");
        let setup = start_with(
            &Args::default(),
            env(&[(ENDPOINT_ENV, "http://127.0.0.1:4318")]),
            false,
        )
        .unwrap();
        assert!(setup.layer.is_none());
        assert!(setup.notice.unwrap().contains(ENDPOINT_ENV));
    }

    #[test]
    fn nothing_is_set_up_without_an_endpoint() {
        let setup = start_with(&Args::default(), env(&[(ENDPOINT_ENV, " ")]), true).unwrap();
        assert!(setup.layer.is_none() && setup.exporter.is_none() && setup.notice.is_none());
    }

    #[test]
    fn the_flag_wins_over_the_variables_and_the_service_defaults_to_axle() {
        let vars = env(&[(ENDPOINT_ENV, "http://a:1"), (SERVICE_ENV, "shop")]);
        let args = Args {
            otlp_endpoint: Some("http://b:2".into()),
            otlp_service_name: None,
        };
        assert_eq!(endpoint(&args, &vars), Some(("http://b:2".into(), true)));
        assert_eq!(service_name(&args, &vars), "shop");
        assert_eq!(service_name(&Args::default(), &env(&[])), "axle");
        let named = Args {
            otlp_service_name: Some("edge".into()),
            ..Args::default()
        };
        assert_eq!(service_name(&named, &vars), "edge");
    }
}
