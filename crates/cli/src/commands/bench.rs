//! `axle bench plugins` (with `--languages`) and `axle bench rpc`.

use std::path::Path;
use std::process::ExitCode;

use axle::manifest::Manifest;
use axle::plugin::PluginHost;
use axle_bench::{self as bench, Budget, Report};

pub fn plugins(manifest: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::load_or_embedded(manifest)?;
    let host = PluginHost::with_default_cache()?;
    let progress = crate::progress::spinner("measuring every plugin's hot functions".into());
    let report = bench::run(&host, &manifest, Budget::default());
    progress.finish_and_clear();
    let report = report?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// `axle bench plugins --languages`.
pub fn languages(target_dir: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let target = target_dir.map_or_else(bench::languages::default_target_dir, Path::to_path_buf);
    let host = PluginHost::with_default_cache()?;
    let report = bench::languages::run(&host, &target, Budget::default())?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "round-robin selector in each language: select on a set of {} endpoints; \
         floor (empty scalar component call) {:.0} ns\n",
        report.endpoints, report.floor_ns
    );
    println!(
        "{:<18} {:>10} {:>10} {:>22} {:>11} {:>11} {:>10}",
        "language",
        "component",
        "compiled",
        "first load",
        "cached load",
        "instantiate",
        "select ns"
    );
    for r in &report.rows {
        let first = format!(
            "{} {:.1} ms",
            if r.first_load_cache_hit {
                "cache hit"
            } else {
                "compiled"
            },
            r.first_load_ms
        );
        println!(
            "{:<18} {:>10} {:>10} {:>22} {:>8.2} ms {:>8.0} µs {:>10.0}",
            r.language,
            super::size(r.size_bytes),
            r.artifact_bytes.map_or("-".into(), |b| super::size(
                usize::try_from(b).unwrap_or(usize::MAX)
            )),
            first,
            r.cached_load_ms,
            r.instantiate_us,
            r.select_ns
        );
    }
    for m in &report.missing {
        println!(
            "{:<18} not built ({}): {}",
            m.language, m.component, m.build
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Which cells `axle bench rpc` measures, and for how long.
pub struct Shape {
    pub seconds: f64,
    pub rounds: Option<u16>,
    pub concurrencies: Vec<u16>,
    pub sweep: bool,
    pub short: bool,
}

/// `axle bench rpc`.
pub fn rpc(
    manifest: Option<&Path>,
    json: bool,
    shape: Shape,
    systems: &[String],
) -> anyhow::Result<ExitCode> {
    let Shape {
        seconds,
        rounds,
        concurrencies,
        sweep,
        short,
    } = shape;
    for s in systems {
        if !bench::rpc::SYSTEMS.contains(&s.as_str()) {
            anyhow::bail!(
                "unknown system `{s}` (systems: {})",
                bench::rpc::SYSTEMS.join(", ")
            );
        }
    }
    let systems: Vec<&str> = if systems.is_empty() {
        bench::rpc::SYSTEMS.to_vec()
    } else {
        systems.iter().map(String::as_str).collect()
    };
    let manifest = Manifest::load_or_embedded(manifest)?;
    let host = PluginHost::with_default_cache()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let duration = std::time::Duration::from_secs_f64(seconds.clamp(0.1, 600.0));
    let plan = match (short, sweep) {
        (true, _) => bench::rpc::Plan::short(),
        (false, true) => bench::rpc::Plan::sweep(duration),
        (false, false) => bench::rpc::Plan::standard(duration),
    };
    let mut plan = match rounds {
        Some(rounds) => plan.in_rounds(usize::from(rounds)),
        None => plan,
    };
    if !concurrencies.is_empty() {
        plan.concurrencies = concurrencies.into_iter().map(usize::from).collect();
        plan.concurrencies.sort_unstable();
        plan.concurrencies.dedup();
    }
    let progress = crate::progress::spinner(format!(
        "loopback echo: {} at payloads {:?} and concurrency {:?}, {} rounds, about {:.0} s",
        systems.join(", "),
        plan.payloads,
        plan.concurrencies,
        plan.rounds,
        plan.seconds(systems.len())
    ));
    let report = rt.block_on(bench::rpc::run(&host, &manifest, &plan, &systems));
    progress.finish_and_clear();
    let report = report?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", bench::rpc::table::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(report: &Report) {
    println!(
        "floor (empty scalar component call): {:.0} ns at the start; x floor divides by \
         the floor measured beside each plugin\n",
        report.floor_ns
    );
    let bytes: Vec<String> = report
        .bytes_floor
        .iter()
        .map(|b| format!("{} {:.0} ns", b.param, b.ns))
        .collect();
    println!(
        "byte floor (the same bytes in and out, no work): {}\n",
        bytes.join(", ")
    );
    println!(
        "{:<16} {:<14} {:<8} {:>7} {:>10} {:>10} {:>8} {:>9}",
        "plugin", "kind", "function", "param", "wasm ns", "native ns", "x floor", "x native"
    );
    for r in &report.plugins {
        let native = r.native_ns.map_or("-".into(), |n| format!("{n:.1}"));
        let vs_native = r
            .native_ns
            .map_or("-".into(), |n| format!("{:.1}", r.wasm_ns / n.max(0.1)));
        println!(
            "{:<16} {:<14} {:<8} {:>7} {:>10.1} {:>10} {:>8.2} {:>9}",
            r.name,
            r.kind,
            r.function,
            r.param,
            r.wasm_ns,
            native,
            r.wasm_ns / r.floor_ns,
            vs_native
        );
    }
    // The selector targets, read off this run: a call within 1.3x the floor at every
    // endpoint count (the floor measured beside each row), and the cost at 10,000 within
    // 1.2x the cost at 10.
    println!(
        "\nselector targets (≤ 1.3x floor at every endpoint count; ≤ 1.2x own cost at 10 when at 10,000):"
    );
    let selectors: std::collections::BTreeSet<&str> = report
        .plugins
        .iter()
        .filter(|r| r.kind == "selector")
        .map(|r| r.name.as_str())
        .collect();
    for name in selectors {
        let at = |n: &str| {
            report
                .plugins
                .iter()
                .find(|r| r.name == name && r.param == n)
        };
        let worst = bench::ENDPOINT_COUNTS
            .iter()
            .filter_map(|n| at(&n.to_string()))
            .map(|r| r.wasm_ns / r.floor_ns)
            .fold(f64::NAN, f64::max);
        if let (Some(small), Some(large)) = (at("10"), at("10000")) {
            println!(
                "  {name:<16} {:.2}x floor at 10, {worst:.2}x at worst, {:.2}x at 10,000 vs 10",
                small.wasm_ns / small.floor_ns,
                large.wasm_ns / small.wasm_ns
            );
        }
    }
    // The serializer target, with the part no form of crossing can avoid: a call that
    // carries the same bytes in and out and does nothing (the byte floor).
    println!("\nserializer target (≤ 2x native at 1 KiB; the byte floor alone, as x native):");
    print_serializer_ratios(report, "1KiB");
    println!(
        "\nserializers on a record of {} short fields (for reference; no target):",
        bench::RECORD_FIELDS
    );
    print_serializer_ratios(report, "record");
}

/// Each serializer's row at `param` as x native, beside the byte floor at the same size.
fn print_serializer_ratios(report: &Report, param: &str) {
    let bytes_floor = report
        .bytes_floor
        .iter()
        .find(|b| b.param == param)
        .map_or(f64::NAN, |b| b.ns);
    for r in report
        .plugins
        .iter()
        .filter(|r| r.kind == "serializer" && r.param == param)
    {
        if let Some(native) = r.native_ns {
            println!(
                "  {:<16} {:<6} {:.2}x native (byte floor {:.2}x)",
                r.name,
                r.function,
                r.wasm_ns / native,
                bytes_floor / native
            );
        }
    }
}

/// `axle bench swap`.
pub fn swap(json: bool) -> anyhow::Result<ExitCode> {
    let host = std::sync::Arc::new(axle::plugin::PluginHost::with_default_cache()?);
    let r = axle_bench::swap::run(host)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "hot-swap of a cached Rust selector (round-robin <-> p2c-ewma), {} rounds each",
        r.rounds
    );
    println!("{:<44} {:>9} {:>9} {:>9}", "", "p50 ms", "p90 ms", "max ms");
    for (name, v) in [
        (
            "explicit (Client::swap, what `axle swap` runs)",
            r.explicit_us,
        ),
        ("manifest saved -> new selector serving", r.file_us),
    ] {
        println!(
            "{name:<44} {:>9.2} {:>9.2} {:>9.2}",
            ms(v[0]),
            ms(v[1]),
            ms(v[2])
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `axle bench hostile`.
pub fn hostile(seconds: f64, json: bool, only: Option<&str>) -> anyhow::Result<ExitCode> {
    let host = axle::plugin::PluginHost::with_default_cache()?;
    let duration = std::time::Duration::from_secs_f64(seconds.clamp(0.2, 60.0));
    if !json {
        eprintln!(
            "{} cases of {seconds:.1} s each: the hostile selector in echo's path, {} callers",
            axle_bench::hostile::CASES.len(),
            axle_bench::hostile::CALLERS
        );
    }
    let r = crate::runtime()?.block_on(axle_bench::hostile::run(&host, duration, only))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<28} {:>10} {:>6} {:>9} {:>9} {:>7} {:>12} {:>10} {:>6}",
        "selector in echo's path",
        "req/s",
        "ratio",
        "1st s",
        "p99 µs",
        "errors",
        "other p99 µs",
        "defaults",
        "trips"
    );
    for row in &r.rows {
        println!(
            "{:<28} {:>10.0} {:>6.2} {:>9.2} {:>9.0} {:>7} {:>12.0} {:>10} {:>6}",
            row.case,
            row.req_per_s,
            row.ratio,
            row.first_second_ratio,
            row.p99_us,
            row.errors,
            row.other_p99_us,
            row.safe_defaults,
            row.quarantine_trips
        );
    }
    println!(
        "targets: >= 0.50 of the baseline when every call faults (within the first second), \
         >= 0.90 at 1%; the other path's p99 unchanged"
    );
    Ok(ExitCode::SUCCESS)
}

/// `axle bench sim`: the strategy lab's speed on `examples/sim/10k.toml` (10,000 providers,
/// 1,000,000 requests, p2c-ewma deciding through wasm) or on `scenario`: wall time,
/// events/s, requests/s. The bar is 60 s for that scenario.
pub fn sim(scenario: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let run = match scenario {
        Some(path) => axle_sim::run(&axle_sim::Scenario::load(path)?, None, None)?,
        None => {
            let (s, m) = axle_sim::bench_scenario()?;
            axle_sim::run_with(&s, m, "embedded defaults + p2c-ewma", None)?
        }
    };
    let wall = run.wall.as_secs_f64();
    let per_s = |n: u64| n as f64 / wall.max(1e-9);
    if json {
        let out = serde_json::json!({
            "providers": run.report.providers,
            "requests": run.requests,
            "events": run.events,
            "simulated_s": run.report.duration_s,
            "wall_s": wall,
            "events_per_s": per_s(run.events),
            "requests_per_s": per_s(run.requests),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "sim: {} providers, {} requests, {:.0} s simulated: {:.2} s wall, {:.0} events/s, {:.0} requests/s",
            run.report.providers,
            run.requests,
            run.report.duration_s,
            wall,
            per_s(run.events),
            per_s(run.requests)
        );
    }
    Ok(ExitCode::SUCCESS)
}
