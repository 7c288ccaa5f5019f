//! The `axle` command.

mod cluster;
mod commands;
mod logging;
mod otlp;
mod progress;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Allocations per request in `axle bench rpc`: only in a build that asks for it.
#[cfg(feature = "count-allocs")]
#[global_allocator]
static ALLOC: axle_bench::alloc_count::CountingAlloc = axle_bench::alloc_count::CountingAlloc;

/// Axle: an RPC runtime whose strategies are WebAssembly plugins.
#[derive(Parser)]
#[command(name = "axle", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: logging::LogArgs,
    #[command(flatten)]
    otlp: otlp::Args,
}

#[derive(Subcommand)]
enum Command {
    /// Three providers and a consumer on loopback, load for a few seconds, a report.
    Demo(commands::demo::Args),
    /// Host the built-in services (echo, flaky, kv).
    Serve(commands::serve::Args),
    /// One call through the full client pipeline; prints the JSON answer.
    Call(commands::call::Args),
    /// HTTP/1.1 and HTTP/2 in front of Axle services: POST /{service}/{method} and the
    /// manifest's [gateway.routes], each request one external call.
    Gateway(commands::gateway::Args),
    /// Axle for an application in any language on this host: serves its services
    /// ([sidecar.provides]) by forwarding to it over HTTP, and lets it call others
    /// through a loopback HTTP listener.
    Sidecar(commands::sidecar::Args),
    /// The strategy lab: simulate providers, faults and traffic, with the manifest's
    /// plugins and the kernel's health, breaker, retry and budget deciding on virtual time.
    Sim(commands::sim::Args),
    /// Per service and endpoint (client) and per method (server): state, calls, errors,
    /// latency, in-flight — from a running kernel (--admin) or probed from a manifest.
    Stats(commands::stats::Args),
    /// Fill a slot of a running kernel with another plugin (hot-swap, via --admin).
    Swap(commands::swap::Args),
    /// The consumers registered for a service in an etcd registry.
    Consumers(commands::consumers::Args),
    /// A service's run-time rule in etcd: put (checked first), get, history, rollback.
    #[command(subcommand)]
    Rules(commands::rules::Command),
    /// Work with plugins.
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Inspect the manifest.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Measure.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The cache of compiled plugins (`$AXLE_CACHE_DIR`, else `~/.cache/axle`).
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Print a shell completion script (bash, zsh, fish, ...).
    Completions(commands::docs::CompletionsArgs),
    /// Print the man page, or write one per command with --dir.
    Man(commands::docs::ManArgs),
}

#[derive(Subcommand)]
enum CacheCommand {
    /// Print the cache directory (and whether it is in use).
    Dir,
    /// Remove artifacts this axle cannot use (other wasmtime versions or settings) and
    /// leftover temporary files.
    Prune,
    /// Remove every compiled artifact (the next start compiles again).
    Clear,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// The effective governance of SERVICE/METHOD and the tier each value came from.
    Explain {
        /// `service/method`.
        target: String,
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Validate a manifest fully (layers, keys, plugin names, governance values, the files
    /// it names) without starting anything: `ok: PATH`, or every error as
    /// FILE:LINE:COLUMN: KEY: REASON and a non-zero exit.
    Check {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Print the effective manifest (embedded defaults <- extends chain <- the file), each
    /// value followed by `# from FILE`.
    Show {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Print the manifest's JSON Schema (docs/manifest.schema.json).
    Schema,
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Load every plugin of the manifest, self-check it, and print what it cost.
    Check {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Write a plugin template (source, build file, manifest entry, README) that builds
    /// and passes `axle plugins check` as generated.
    New(commands::new::Args),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Loopback echo: Axle with wasm plugins (and their native twins) vs raw framing vs
    /// tonic (gRPC): req/s, latency, CPU per request.
    Rpc {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Measured seconds per system and cell (payload × concurrency), split over the
        /// rounds.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Rounds per cell: each runs every system once, in turn, so a machine that slows
        /// down for a while slows every system alike; ratios are the median of the
        /// rounds' (default 3, 2 with `--short`).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=100))]
        rounds: Option<u16>,
        /// Only these concurrencies (repeatable), in place of the plan's: one cell to
        /// profile, say.
        #[arg(long = "concurrency", value_parser = clap::value_parser!(u16).range(1..=4096))]
        concurrencies: Vec<u16>,
        /// Only these systems (repeatable). Default: all of them.
        #[arg(long = "system")]
        systems: Vec<String>,
        /// Every payload (64 B, 1 KiB, 16 KiB) at every concurrency (1, 8, 64, 256):
        /// minutes, not seconds.
        #[arg(long)]
        sweep: bool,
        /// A few cells of the sweep, a fifth of a second each (CI: it runs, the numbers
        /// are sane). Overrides `--sweep` and `--seconds`.
        #[arg(long)]
        short: bool,
    },
    /// A hostile plugin in the path (panics, spins, sleeps, grows, prints) against a
    /// well-behaved one: throughput ratios, p99, and the p99 of a path it is not in.
    Hostile {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Seconds per case.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Only the cases whose name contains this text (the baseline always runs).
        #[arg(long)]
        only: Option<String>,
    },
    /// What the HTTP gateway adds: HTTP → gateway → Axle → echo beside HTTP → an echo
    /// served by hyper directly, req/s and p50/p99.
    Gateway {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Seconds per system and concurrency.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    /// The strategy lab's speed: wall time, events/s and requests/s of `axle sim` on the
    /// 10,000-provider, 1,000,000-request scenario (or SCENARIO).
    Sim {
        /// A scenario file instead of the built-in one (examples/sim/10k.toml).
        scenario: Option<PathBuf>,
        /// Print the numbers as JSON.
        #[arg(long)]
        json: bool,
    },
    /// How long a hot-swap takes: in the kernel, and from a saved manifest to serving.
    Swap {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// ns per call of every plugin's hot functions, beside the floor and native twins.
    Plugins {
        /// The manifest (default: the one embedded in the binary).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Instead: the round-robin selector in every language side by side (Rust
        /// built in; C, Python, JS built by `xtask examples`, skipped when missing).
        #[arg(long, conflicts_with = "manifest")]
        languages: bool,
        /// With --languages: the target directory holding `<lang>-plugins/` (default:
        /// the one this binary was built in).
        #[arg(long, requires = "languages")]
        target_dir: Option<PathBuf>,
    },
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let otlp = match otlp::start(&cli.otlp) {
        Ok(otlp) => otlp,
        Err(e) => {
            eprintln!("axle: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    logging::init(&cli.log, otlp.layer);
    if let Some(notice) = otlp.notice {
        tracing::warn!("{notice}");
    }
    // Kept to the end of `main`: dropping it sends the last spans.
    let _exporter = otlp.exporter;
    let result = match cli.command {
        Command::Demo(args) => runtime().and_then(|rt| rt.block_on(commands::demo::run(args))),
        Command::Serve(args) => runtime().and_then(|rt| rt.block_on(commands::serve::run(args))),
        Command::Call(args) => runtime().and_then(|rt| rt.block_on(commands::call::run(args))),
        Command::Gateway(args) => {
            runtime().and_then(|rt| rt.block_on(commands::gateway::run(args)))
        }
        Command::Sidecar(args) => {
            runtime().and_then(|rt| rt.block_on(commands::sidecar::run(args)))
        }
        Command::Sim(args) => commands::sim::run(args),
        Command::Stats(args) => runtime().and_then(|rt| rt.block_on(commands::stats::run(args))),
        Command::Swap(args) => runtime().and_then(|rt| rt.block_on(commands::swap::run(args))),
        Command::Consumers(args) => {
            runtime().and_then(|rt| rt.block_on(commands::consumers::run(args)))
        }
        Command::Rules(command) => {
            runtime().and_then(|rt| rt.block_on(commands::rules::run(command)))
        }
        Command::Config(ConfigCommand::Explain { target, manifest }) => {
            commands::config::explain(manifest.as_deref(), &target)
        }
        Command::Config(ConfigCommand::Check { manifest }) => {
            commands::config::check(manifest.as_deref())
        }
        Command::Config(ConfigCommand::Show { manifest }) => {
            commands::config::show(manifest.as_deref())
        }
        Command::Config(ConfigCommand::Schema) => commands::config::schema(),
        Command::Plugins(PluginsCommand::Check { manifest }) => {
            commands::check::run(manifest.as_deref())
        }
        Command::Plugins(PluginsCommand::New(args)) => commands::new::run(args),
        Command::Bench(BenchCommand::Rpc {
            manifest,
            json,
            seconds,
            rounds,
            concurrencies,
            systems,
            sweep,
            short,
        }) => commands::bench::rpc(
            manifest.as_deref(),
            json,
            commands::bench::Shape {
                seconds,
                rounds,
                concurrencies,
                sweep,
                short,
            },
            &systems,
        ),
        Command::Bench(BenchCommand::Swap { json }) => commands::bench::swap(json),
        Command::Bench(BenchCommand::Sim { scenario, json }) => {
            commands::bench::sim(scenario.as_deref(), json)
        }
        Command::Bench(BenchCommand::Gateway {
            manifest,
            json,
            seconds,
        }) => commands::bench_gateway::run(manifest.as_deref(), json, seconds),
        Command::Bench(BenchCommand::Hostile {
            json,
            seconds,
            only,
        }) => commands::bench::hostile(seconds, json, only.as_deref()),
        Command::Bench(BenchCommand::Plugins {
            json,
            languages: true,
            target_dir,
            ..
        }) => commands::bench::languages(target_dir.as_deref(), json),
        Command::Bench(BenchCommand::Plugins { manifest, json, .. }) => {
            commands::bench::plugins(manifest.as_deref(), json)
        }
        Command::Completions(args) => commands::docs::completions(args, Cli::command()),
        Command::Man(args) => commands::docs::man(args, Cli::command()),
        Command::Cache(CacheCommand::Dir) => commands::cache::dir(),
        Command::Cache(CacheCommand::Prune) => commands::cache::remove(true),
        Command::Cache(CacheCommand::Clear) => commands::cache::remove(false),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("axle: {e:#}");
            ExitCode::FAILURE
        }
    }
}
