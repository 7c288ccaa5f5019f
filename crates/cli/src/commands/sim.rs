//! `axle sim SCENARIO.toml`: the strategy lab (`docs/lab.md`). Runs the scenario through
//! `axle-sim` and prints a summary, the JSON report (`--json`), SVG charts (`--plot DIR`),
//! or two manifests on the same seed side by side (`--compare M1 M2`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use axle_sim::{Report, Scenario};

/// `axle sim` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The scenario file: providers, arrivals, request mix, fault script (`docs/lab.md`).
    pub scenario: PathBuf,
    /// Print the whole report as JSON (with --compare: both, keyed by manifest).
    #[arg(long)]
    pub json: bool,
    /// Write SVG charts (traffic share, success rate, latency over time) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run two manifests on the same seed and compare them (charts side by side, same axes).
    #[arg(long, num_args = 2, value_names = ["M1", "M2"], conflicts_with = "manifest")]
    pub compare: Option<Vec<PathBuf>>,
    /// The manifest whose plugins decide (default: the scenario's `manifest`, else the
    /// embedded defaults).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Seed every random draw with N instead of the scenario's `seed`.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scenario = Scenario::load(&args.scenario)?;
    match &args.compare {
        Some(pair) => compare(&args, &scenario, &pair[0], &pair[1]),
        None => single(&args, &scenario),
    }
}

fn single(args: &Args, scenario: &Scenario) -> anyhow::Result<ExitCode> {
    let run = axle_sim::run(scenario, args.manifest.as_deref(), args.seed)?;
    if let Some(dir) = &args.plot {
        for file in axle_sim::plot::single(dir, &run.report)? {
            eprintln!("wrote {}", file.display());
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&run.report)?);
    } else {
        summary(&run.report);
        println!(
            "simulated {:.0} s in {:.2} s wall ({} events)",
            run.report.duration_s,
            run.wall.as_secs_f64(),
            run.events
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn compare(args: &Args, scenario: &Scenario, m1: &Path, m2: &Path) -> anyhow::Result<ExitCode> {
    let a = axle_sim::run(scenario, Some(m1), args.seed)?.report;
    let b = axle_sim::run(scenario, Some(m2), args.seed)?.report;
    let label = |p: &Path| {
        p.file_stem().map_or_else(
            || p.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    };
    let (la, lb) = (label(m1), label(m2));
    if let Some(dir) = &args.plot {
        for file in axle_sim::plot::compare(dir, (&la, &a), (&lb, &b))? {
            eprintln!("wrote {}", file.display());
        }
    }
    if args.json {
        let both = serde_json::json!({ "a": a, "b": b });
        println!("{}", serde_json::to_string_pretty(&both)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (name, r) in [(&la, &a), (&lb, &b)] {
        println!("== {name} ({})", r.manifest);
        summary(r);
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

/// A few lines a person reads first.
fn summary(r: &Report) {
    let t = &r.totals;
    println!(
        "{} providers, {:.0} s, seed {}: {} requests, success {:.2}%, p50 {:.2} ms, p99 {:.2} ms",
        r.providers,
        r.duration_s,
        r.seed,
        t.requests,
        100.0 * t.success_rate,
        t.p50_ms,
        t.p99_ms
    );
    let errors: Vec<String> = t.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !errors.is_empty() {
        println!("errors: {}", errors.join(", "));
    }
    println!(
        "retries {}, failovers {}, budget refused {}, breaker rejected {}, tables published {}",
        t.retries, t.failovers, t.budget_refused, t.breaker_rejected, t.tables_published
    );
    let health: Vec<String> = t.health.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !health.is_empty() {
        println!("health: {}", health.join(", "));
    }
    println!(
        "{:<24} {:>10} {:>8} {:>12}  state",
        "endpoint", "attempts", "share", "rate-limited"
    );
    for e in r.endpoints.iter().take(20) {
        println!(
            "{:<24} {:>10} {:>7.2}% {:>12}  {}",
            e.name,
            e.attempts,
            100.0 * e.share,
            e.rate_limited,
            e.state
        );
    }
}
