//! The subcommands' own output (the only place that prints to stdout).

pub mod admin;
pub mod bench;
pub mod bench_gateway;
pub mod cache;
pub mod call;
pub mod check;
pub mod config;
pub mod consumers;
pub mod demo;
pub mod discovery;
pub mod docs;
pub mod gateway;
pub mod new;
pub mod rules;
pub mod rules_follow;
pub mod rules_watch;
pub mod serve;
pub mod serve_rules;
pub mod sidecar;
pub mod sim;
pub mod stats;
pub mod swap;
pub mod templates;
pub mod tls;

/// `1.2 ms`, `850 µs`, `42 ns`.
pub fn duration(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// `15.2 KiB`.
pub fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}
