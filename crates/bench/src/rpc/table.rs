//! The text table `axle bench rpc` prints: kept beside the report so a test can check
//! that every row comes out, and the CLI stays a thin front end.

use std::fmt::Write;

use super::Report;

/// The report as the table `axle bench rpc` prints.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "loopback echo, payloads {:?} B, concurrency {:?}, {:.1} s per system and cell in \
         {} interleaved round{}\n",
        report.payloads,
        report.concurrencies,
        report.seconds_per_run,
        report.rounds,
        if report.rounds == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "{:<12} {:>8} {:>11} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "system",
        "payload",
        "concurrency",
        "requests",
        "req/s",
        "p50 µs",
        "p99 µs",
        "cpu µs/req",
        "allocs/req",
        "errors"
    );
    let opt = |v: Option<f64>, precision: usize| {
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.precision$}"))
    };
    for r in &report.rows {
        let _ = writeln!(
            out,
            "{:<12} {:>8} {:>11} {:>10} {:>12.0} {:>10.1} {:>10.1} {:>10} {:>10} {:>7}",
            r.system,
            r.payload_bytes,
            r.concurrency,
            r.requests,
            r.req_per_s,
            r.p50_us,
            r.p99_us,
            opt(r.cpu_us_per_req, 2),
            opt(r.allocs_per_req, 1),
            r.errors
        );
    }
    if let Some(x) = &report.ratios {
        let _ = writeln!(
            out,
            "\nat {} B, concurrency {} (req/s and cpu: the median of {} rounds' ratios):\n\
             axle/raw req/s {:.2}{} (target >= 0.8)",
            report.payload_bytes,
            x.concurrency,
            x.rounds,
            x.axle_vs_raw,
            range(x.axle_vs_raw_range),
        );
        if let Some(ratio) = x.axle_vs_tonic {
            let _ = writeln!(
                out,
                "axle/tonic: req/s {ratio:.2} (target >= 3), p99 {} (target <= 1), cpu per \
                 request {}",
                opt(x.axle_p99_vs_tonic, 2),
                opt(x.axle_cpu_vs_tonic, 2)
            );
        }
        if let Some(ratio) = x.axle_vs_tarpc {
            let _ = writeln!(
                out,
                "axle/tarpc: req/s {ratio:.2}, p99 {}, cpu per request {}",
                opt(x.axle_p99_vs_tarpc, 2),
                opt(x.axle_cpu_vs_tarpc, 2)
            );
        }
        if let Some(ratio) = x.wasm_vs_native {
            let _ = writeln!(
                out,
                "wasm plugins vs native twins (axle/axle-native): req/s {ratio:.2}{} (target \
                 >= 0.95), cpu per request {}",
                range(x.wasm_vs_native_range),
                opt(x.wasm_vs_native_cpu, 2)
            );
        }
    }
    if report.rows.iter().all(|r| r.allocs_per_req.is_none()) {
        out.push_str(
            "\n(allocations are counted only by a build with `--features count-allocs`)\n",
        );
    }
    out
}

/// ` (rounds 0.66–0.74)` when the rounds disagreed.
fn range(r: Option<[f64; 2]>) -> String {
    match r {
        Some([low, high]) if high > low => format!(" (rounds {low:.2}–{high:.2})"),
        _ => String::new(),
    }
}
