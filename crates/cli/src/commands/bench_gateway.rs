//! `axle bench gateway`: HTTP → gateway → Axle → echo beside HTTP → an echo served by
//! hyper directly, in one run (`axle_bench::gateway`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use axle::manifest::Manifest;
use axle::plugin::PluginHost;

pub fn run(manifest: Option<&Path>, json: bool, seconds: f64) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::load_or_embedded(manifest)?;
    let host = PluginHost::with_default_cache()?;
    let duration = Duration::from_secs_f64(seconds.clamp(0.1, 600.0));
    let report = crate::runtime()?.block_on(axle_bench::gateway::run(
        &host,
        &manifest,
        duration,
        &[1, 32],
    ))?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "loopback HTTP/1.1 keep-alive, POST of a {} B JSON body, {:.1} s per run\n",
        report.body_bytes, report.seconds_per_run
    );
    println!(
        "{:<12} {:>11} {:>10} {:>12} {:>10} {:>10} {:>7}",
        "system", "concurrency", "requests", "req/s", "p50 µs", "p99 µs", "errors"
    );
    for r in &report.rows {
        println!(
            "{:<12} {:>11} {:>10} {:>12.0} {:>10.1} {:>10.1} {:>7}",
            r.system, r.concurrency, r.requests, r.req_per_s, r.p50_us, r.p99_us, r.errors
        );
    }
    println!(
        "\nthe gateway adds {:.1} µs at p50 (concurrency 1; target <= 100 µs); \
         gateway/direct req/s {:.2} at the highest concurrency",
        report.added_p50_us, report.throughput_ratio
    );
    Ok(ExitCode::SUCCESS)
}
