//! `axle bench plugins`.

use std::path::Path;
use std::process::ExitCode;

use axle::bench::{self, Budget, Report};
use axle::manifest::Manifest;
use axle::plugin::PluginHost;

pub fn plugins(manifest: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::load_or_embedded(manifest)?;
    let host = PluginHost::with_default_cache()?;
    let report = bench::run(&host, &manifest, Budget::default())?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(report: &Report) {
    println!(
        "floor (empty scalar component call, same run): {:.0} ns\n",
        report.floor_ns
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
            r.wasm_ns / report.floor_ns,
            vs_native
        );
    }
    // The foundation's targets, read off this run.
    println!(
        "\nselector targets (≤ 2x floor at 10 endpoints; ≤ 1.2x own cost at 10 when at 10,000):"
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
                .map(|r| r.wasm_ns)
        };
        if let (Some(small), Some(large)) = (at("10"), at("10000")) {
            println!(
                "  {name:<16} {:.2}x floor at 10, {:.2}x at 10,000 vs 10",
                small / report.floor_ns,
                large / small
            );
        }
    }
}
