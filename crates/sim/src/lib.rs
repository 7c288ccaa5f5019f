//! `axle sim`: the strategy lab. A deterministic discrete-event simulation of providers
//! (latency distributions, capacity and queueing, zones, weights, warm-up) under a fault
//! script, called by one caller's kernel whose decisions are the real ones: the
//! manifest's plugins loaded through the same plugin host (selector, routers, health
//! scorer), and the kernel's own facts, breakers, retry budget, rotation, health verdict
//! rules and retry/failover policy, on virtual time (`axle_core::clock::VirtualClock`).
//!
//! One concern per file: `scenario.rs` (the file and its checks), `provider.rs` (latency,
//! capacity, queue), `faults.rs` (the fault script as a timeline), `arrivals.rs`,
//! `engine.rs` (the event loop), `caller.rs` (the kernel's request path),
//! `health.rs` (the monitor's rounds), `limit.rs` (the providers' limiters),
//! `report.rs` (JSON), `plot.rs` (SVG).

pub mod arrivals;
pub mod caller;
pub mod engine;
pub mod faults;
pub mod health;
pub mod limit;
pub mod plot;
pub mod provider;
pub mod report;
pub mod rng;
pub mod scenario;

pub use report::Report;
pub use scenario::Scenario;

/// What one run gives: the report, and what it cost (for `axle bench sim`).
pub struct Run {
    pub report: Report,
    /// Events handled.
    pub events: u64,
    /// Requests made.
    pub requests: u64,
    /// Wall time of the simulation proper (plugins loaded before it started).
    pub wall: std::time::Duration,
}

/// Runs `scenario` with `manifest` (`None`: the scenario's, else the embedded defaults);
/// `seed` overrides the scenario's. Runs take turns on the process's virtual clock.
pub fn run(
    scenario: &Scenario,
    manifest: Option<&std::path::Path>,
    seed: Option<u64>,
) -> anyhow::Result<Run> {
    let path = manifest
        .map(|p| p.to_path_buf())
        .or_else(|| scenario.manifest.clone());
    let loaded = axle_manifest::Manifest::load_or_embedded(path.as_deref())?;
    let name = path.map_or("embedded defaults".to_string(), |p| p.display().to_string());
    run_with(scenario, loaded, &name, seed)
}

/// [`run`] with a manifest already loaded, named `name` in the report.
pub fn run_with(
    scenario: &Scenario,
    manifest: axle_manifest::Manifest,
    name: &str,
    seed: Option<u64>,
) -> anyhow::Result<Run> {
    let mut s = scenario.clone();
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let mut engine = engine::Engine::new(&s, manifest)?;
    let started = std::time::Instant::now();
    engine.run();
    let wall = started.elapsed();
    Ok(Run {
        report: engine.rec.report(&s, name),
        events: engine.counts.events,
        requests: engine.counts.requests,
        wall,
    })
}

/// The scenario `axle bench sim` runs (`examples/sim/10k.toml`: 10,000 providers,
/// 1,000,000 requests) with the embedded manifest and `p2c-ewma` as the selector (what
/// its `manifest` file says), so the bench needs no file.
pub fn bench_scenario() -> anyhow::Result<(Scenario, axle_manifest::Manifest)> {
    let mut s = Scenario::parse(include_str!("../../../examples/sim/10k.toml"))?;
    s.manifest = None;
    let mut m = axle_manifest::Manifest::embedded()?;
    m.slots.selector = Some("p2c-ewma".into());
    Ok((s, m))
}

#[cfg(test)]
mod tests;
