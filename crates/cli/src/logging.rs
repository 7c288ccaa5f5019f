//! Where `axle`'s logs go and how they look, by the usual conventions: stderr; the
//! filter from `AXLE_LOG`, else `RUST_LOG`, else the verbosity flags (`warn`, one step up
//! per `-v`, one down per `-q`); colour only on a terminal (never with `NO_COLOR`); one
//! JSON object per line with `--log-format json`, for collectors.

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The environment variables a filter is read from, the first set winning.
const FILTER_ENV: [&str; 2] = ["AXLE_LOG", "RUST_LOG"];

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: `TIME LEVEL target: message key=value`.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`, `spans`).
    Json,
}

/// The global logging flags.
#[derive(clap::Args, Debug, Default)]
pub struct LogArgs {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// More log output (-v info, -vv debug, -vvv trace); AXLE_LOG or RUST_LOG, when set,
    /// say exactly what to log instead.
    #[arg(short = 'v', long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output (-q errors only, -qq nothing).
    #[arg(short = 'q', long, global = true, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

/// The level the flags ask for when no filter variable is set.
fn level(verbose: u8, quiet: u8) -> &'static str {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let at = (2 + i32::from(verbose) - i32::from(quiet)).clamp(0, 5);
    LEVELS[at as usize]
}

/// The filter: the first variable of [`FILTER_ENV`] that is set (a malformed one is
/// reported and the flags' level used), else the flags'.
fn filter(args: &LogArgs, var: impl Fn(&str) -> Option<String>) -> (EnvFilter, Option<String>) {
    let fallback = || EnvFilter::new(level(args.verbose, args.quiet));
    for name in FILTER_ENV {
        if let Some(value) = var(name) {
            return match EnvFilter::try_new(&value) {
                Ok(f) => (f, None),
                Err(e) => (
                    fallback(),
                    Some(format!("{name}={value:?} is not a log filter ({e})")),
                ),
            };
        }
    }
    (fallback(), None)
}

/// Installs the subscriber for this process; `spans`, the OTLP exporter's layer when one
/// was asked for, sits beside the log output with its own filter, so exporting the
/// `info` spans does not turn on `info` logs.
pub fn init(args: &LogArgs, spans: Option<crate::otlp::SpanLayer>) {
    let (filter, problem) = filter(args, |name| std::env::var(name).ok());
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match args.log_format {
        LogFormat::Text => fmt.with_ansi(ansi).boxed(),
        LogFormat::Json => fmt.json().with_ansi(false).boxed(),
    };
    tracing_subscriber::registry()
        .with(spans)
        .with(fmt.with_filter(filter))
        .init();
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging at the flags' level instead");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_move_the_level_from_warn() {
        assert_eq!(level(0, 0), "warn");
        assert_eq!(level(1, 0), "info");
        assert_eq!(level(2, 0), "debug");
        assert_eq!(level(9, 0), "trace");
        assert_eq!(level(0, 1), "error");
        assert_eq!(level(0, 5), "off");
        assert_eq!(level(2, 1), "info");
    }

    #[test]
    fn axle_log_wins_over_rust_log_and_a_bad_one_is_reported() {
        let args = LogArgs::default();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let (f, problem) = filter(&args, env(&[("AXLE_LOG", "debug"), ("RUST_LOG", "error")]));
        assert_eq!(f.to_string(), "debug");
        assert!(problem.is_none());
        let (f, _) = filter(&args, env(&[("RUST_LOG", "axle=trace")]));
        assert_eq!(f.to_string(), "axle=trace");
        let (f, _) = filter(&args, env(&[]));
        assert_eq!(f.to_string(), "warn");
        let (f, problem) = filter(&args, env(&[("AXLE_LOG", "=[")]));
        assert_eq!(f.to_string(), "warn");
        assert!(problem.unwrap().contains("AXLE_LOG"));
    }
}
