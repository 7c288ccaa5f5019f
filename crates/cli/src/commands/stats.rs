//! `axle stats`: per service and endpoint, what a client sees (state, rotation, calls,
//! error rate, latency, in-flight, weight), and per service/method, what a server handled
//! (answers by class, in-flight, most at once, latency) — read from a running kernel's
//! admin endpoint (`--admin ADDR`), or, for the client view alone, from a client built
//! here from a manifest whose health monitor probes each endpoint for `--probe-ms`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use axle::admin::{ClientStats, ServerStats, ServiceConsumers, StatsReport, DEFAULT_ADDR};
use axle::client::rules::RuleStatus;
use axle::client::{Client, ClientConfig};
use axle::manifest::Manifest;
use axle::plugin::PluginCounters;
use axle::plugin::PluginHost;

/// `axle stats` flags.
#[derive(clap::Args)]
pub struct Args {
    /// Read a running kernel's admin endpoint (`axle serve --admin`, `axle demo --admin`);
    /// default address 127.0.0.1:7301.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_ADDR,
        conflicts_with = "manifest"
    )]
    admin: Option<String>,
    /// Probe the endpoints of this manifest from here (default without --admin: the
    /// embedded manifest).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Print JSON (the admin endpoint's answer as it came) instead of tables.
    #[arg(long)]
    json: bool,
    /// Without --admin: how long the health monitor dials and heartbeats the endpoints
    /// before the table is printed (ms).
    #[arg(long, default_value_t = 1500)]
    probe_ms: u64,
    /// With --admin: how long to wait for the answer (ms).
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (report, raw) = match &args.admin {
        Some(addr) => {
            let raw = axle::admin::request(
                addr,
                "stats",
                &serde_json::Value::Null,
                Duration::from_millis(args.timeout_ms),
            )
            .await?;
            let report: StatsReport = serde_json::from_value(raw.clone())
                .map_err(|e| anyhow::anyhow!("{addr} answered stats in an unknown shape: {e}"))?;
            (report, raw)
        }
        None => {
            let report = probe(&args).await?;
            let raw = serde_json::to_value(&report)?;
            (report, raw)
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&raw)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// A client from the manifest, its endpoints dialled and heartbeaten for `--probe-ms`.
async fn probe(args: &Args) -> anyhow::Result<StatsReport> {
    let manifest = Manifest::load_or_embedded(args.manifest.as_deref())?;
    let host = PluginHost::with_default_cache()?;
    let client = Client::new(&host, ClientConfig::new(manifest))?;
    let started = Instant::now();
    client.probe_endpoints().await;
    let rest = Duration::from_millis(args.probe_ms).saturating_sub(started.elapsed());
    tokio::time::sleep(rest).await;
    let name = match &args.manifest {
        Some(path) => path.display().to_string(),
        None => "embedded manifest".to_string(),
    };
    Ok(StatsReport {
        clients: vec![ClientStats {
            name,
            services: client.services(),
            plugins: client.plugins(),
            rules: client.rules(),
        }],
        servers: Vec::new(),
        consumers: Vec::new(),
    })
}

/// Both views as tables.
pub fn render(report: &StatsReport) -> String {
    let mut out = String::new();
    for c in &report.clients {
        client_table(&mut out, c);
        plugin_table(&mut out, &c.plugins);
        shadow_table(&mut out, c.services.iter().flat_map(|s| &s.shadows));
    }
    for s in &report.servers {
        server_table(&mut out, s);
        plugin_table(&mut out, &s.plugins);
        shadow_table(&mut out, s.shadows.iter());
    }
    for c in &report.consumers {
        consumer_table(&mut out, c);
    }
    if report.clients.is_empty() && report.servers.is_empty() {
        out.push_str("nothing exposed: no clients, no servers\n");
    }
    out
}

/// The shadow plugins (`docs/shadow.md`): what they decided beside the live ones, and
/// their latest divergence.
fn shadow_table<'a>(
    out: &mut String,
    shadows: impl Iterator<Item = &'a axle::plugin::shadow::ShadowView>,
) {
    use std::fmt::Write;
    let shadows: Vec<_> = shadows.collect();
    if shadows.is_empty() {
        return;
    }
    let _ = writeln!(out, "  shadows (answers never used)");
    let _ = writeln!(
        out,
        "    {:<12} {:<9} {:<16} {:<16} {:>7} {:>9} {:>9} {:>9} {:>7}",
        "service", "kind", "live", "candidate", "sample", "sampled", "agreed", "diverged", "faults"
    );
    for v in &shadows {
        let service = if v.service.is_empty() {
            "-"
        } else {
            &v.service
        };
        let _ = writeln!(
            out,
            "    {:<12} {:<9} {:<16} {:<16} {:>6.1}% {:>9} {:>9} {:>9} {:>7}",
            service,
            v.kind,
            v.live,
            v.candidate,
            v.sample * 100.0,
            v.sampled,
            v.agreed,
            v.diverged,
            v.faults
        );
        if let Some(d) = v.recent.last() {
            let facts = |f: &Option<axle::plugin::shadow::FactsView>| match f {
                Some(f) => format!(
                    " (in flight {}, weight {}, ewma {}, window {}/{} failed)",
                    f.in_flight,
                    f.effective_weight,
                    ns(f.ewma_latency_ns),
                    f.window_failures,
                    f.window_total
                ),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "      last divergence: live {}{} / candidate {}{}",
                d.live,
                facts(&d.live_facts),
                d.candidate,
                facts(&d.candidate_facts)
            );
        }
    }
    out.push('\n');
}

/// Who calls one served service (from the registry), or why that is unknown.
fn consumer_table(out: &mut String, c: &ServiceConsumers) {
    use std::fmt::Write;
    let l = &c.listing;
    let _ = write!(
        out,
        "consumers of {} (namespace {}, group {}): ",
        l.service, l.namespace, l.group
    );
    if let Some(error) = &c.error {
        let _ = writeln!(out, "unknown: {error}\n");
        return;
    }
    let _ = writeln!(out, "{}", l.consumers.len());
    if !l.consumers.is_empty() {
        let _ = writeln!(
            out,
            "  {:<20} {:<16} {:>8}  id",
            "application", "address", "pid"
        );
    }
    for consumer in &l.consumers {
        let _ = writeln!(
            out,
            "  {:<20} {:<16} {:>8}  {}",
            consumer.application, consumer.address, consumer.pid, consumer.id
        );
    }
    for skipped in &l.skipped {
        let _ = writeln!(out, "  skipped (invalid entry): {skipped}");
    }
    out.push('\n');
}

/// Each plugin's calls, faults by cause, quarantine and log lines.
fn plugin_table(out: &mut String, plugins: &[PluginCounters]) {
    use std::fmt::Write;
    if plugins.is_empty() {
        return;
    }
    let width = plugins
        .iter()
        .map(|p| p.name.len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let _ = writeln!(out, "  plugins");
    let _ = writeln!(
        out,
        "    {:<width$} {:>10} {:>7} {:>8} {:>6} {:>6} {:>7} {:>6} {:>8} {:>9} {:>6} {:>9}",
        "plugin",
        "calls",
        "faults",
        "timeouts",
        "traps",
        "memory",
        "blocked",
        "busy",
        "replaced",
        "skipped",
        "trips",
        "log/drop"
    );
    for p in plugins {
        let s = &p.stats;
        let _ = writeln!(
            out,
            "    {:<width$} {:>10} {:>7} {:>8} {:>6} {:>6} {:>7} {:>6} {:>8} {:>9} {:>6} {:>9}{}",
            p.name,
            s.calls,
            s.faults(),
            s.timeouts,
            s.traps,
            s.memory,
            s.blocked,
            s.busy,
            s.replaced,
            s.skipped,
            s.trips,
            format!("{}/{}", s.log_lines, s.log_dropped),
            if s.quarantined { "  QUARANTINED" } else { "" }
        );
    }
    interceptor_table(out, plugins, width);
    out.push('\n');
}

/// What each interceptor decided (the plugin rows above count its calls and faults).
fn interceptor_table(out: &mut String, plugins: &[PluginCounters], width: usize) {
    use std::fmt::Write;
    let rows: Vec<_> = plugins
        .iter()
        .filter_map(|p| p.stats.intercept.map(|i| (&p.name, i)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let width = width.max("interceptor".len());
    let _ = writeln!(
        out,
        "    {:<width$} {:>10} {:>10} {:>8} {:>9} {:>10} {:>7}",
        "interceptor", "calls", "passes", "retagged", "refusals", "memo hits", "faults"
    );
    for (name, i) in rows {
        let _ = writeln!(
            out,
            "    {:<width$} {:>10} {:>10} {:>8} {:>9} {:>10} {:>7}",
            name, i.calls, i.passes, i.tag_changes, i.refusals, i.memo_hits, i.faults
        );
    }
}

fn ns(v: u64) -> String {
    if v == 0 {
        "-".into()
    } else {
        super::duration(Duration::from_nanos(v))
    }
}

fn client_table(out: &mut String, c: &ClientStats) {
    use std::fmt::Write;
    let _ = writeln!(out, "client `{}` (invoke side)", c.name);
    if c.services.is_empty() {
        out.push_str("  no services\n\n");
        return;
    }
    let width = c
        .services
        .iter()
        .flat_map(|s| s.endpoints.iter().map(|e| e.address.len()))
        .chain([8])
        .max()
        .unwrap_or(8);
    for s in &c.services {
        let _ = writeln!(out, "  service {}", s.service);
        let _ = writeln!(
            out,
            "    {:<width$}  {:<10} {:>3} {:>9} {:>7} {:>6} {:>9} {:>9} {:>5} {:>9}",
            "endpoint", "state", "rot", "calls", "faults", "err%", "ewma", "p99", "infl", "weight"
        );
        if s.endpoints.is_empty() {
            out.push_str("    (no endpoints)\n");
        }
        for e in &s.endpoints {
            let weight = if e.effective_weight == e.weight {
                e.weight.to_string()
            } else {
                format!("{}/{}", e.effective_weight, e.weight)
            };
            let _ = writeln!(
                out,
                "    {:<width$}  {:<10} {:>3} {:>9} {:>7} {:>5.1}% {:>9} {:>9} {:>5} {:>9}",
                e.address,
                e.state,
                if e.in_rotation { "yes" } else { "no" },
                e.calls,
                e.faults,
                e.error_rate * 100.0,
                ns(e.ewma_latency_ns),
                ns(e.p99_ns),
                e.in_flight,
                weight,
            );
        }
    }
    rules_table(out, &c.rules);
    out.push('\n');
}

/// The rules section: per followed service, the revision in force and the last refused.
fn rules_table(out: &mut String, rules: &[RuleStatus]) {
    use std::fmt::Write;
    if rules.is_empty() {
        return;
    }
    out.push_str(
        "  rules (axle rules)
",
    );
    for r in rules {
        let in_force = r
            .revision
            .map_or("none (the manifest alone)".to_string(), |v| {
                format!("revision {v}")
            });
        let _ = writeln!(out, "    {:<20} in force: {in_force}", r.service);
        if let Some(bad) = &r.refused {
            let _ = writeln!(
                out,
                "    {:<20} refused: revision {}: {}",
                "", bad.revision, bad.error
            );
        }
    }
}

fn server_table(out: &mut String, s: &ServerStats) {
    use std::fmt::Write;
    let v = &s.view;
    let _ = writeln!(
        out,
        "server `{}` on {} (handle side): {} in flight",
        s.name, v.address, v.in_flight
    );
    if v.refused_closing + v.malformed > 0 {
        let _ = writeln!(
            out,
            "  refused while stopping: {}, naming no method: {}",
            v.refused_closing, v.malformed
        );
    }
    rules_table(out, &s.rules);
    if v.methods.is_empty() {
        out.push_str("  no requests yet\n\n");
        return;
    }
    let target = |m: &axle::server::MethodView| format!("{}/{}", m.service, m.method);
    let errors = |m: &axle::server::MethodView| {
        if m.errors.is_empty() {
            "-".to_string()
        } else {
            m.errors
                .iter()
                .map(|(class, n)| format!("{class}={n}"))
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    let width = v
        .methods
        .iter()
        .map(|m| target(m).len())
        .chain([14])
        .max()
        .unwrap_or(14);
    let ewidth = v
        .methods
        .iter()
        .map(|m| errors(m).len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>9} {:>9} {:>9}  {:<ewidth$}  {:>5} {:>8} {:>9} {:>9} {:>9}",
        "service/method",
        "requests",
        "handled",
        "ok",
        "errors",
        "infl",
        "max-conc",
        "ewma",
        "p50",
        "p99"
    );
    for m in &v.methods {
        let _ = writeln!(
            out,
            "  {:<width$}  {:>9} {:>9} {:>9}  {:<ewidth$}  {:>5} {:>8} {:>9} {:>9} {:>9}",
            target(m),
            m.requests,
            m.handled,
            m.ok,
            errors(m),
            m.in_flight,
            m.max_concurrency_seen,
            ns(m.ewma_latency_ns),
            ns(m.p50_ns),
            ns(m.p99_ns),
        );
    }
    out.push('\n');
}
