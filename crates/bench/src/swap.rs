//! `axle bench swap`: how long a hot-swap takes, two ways.
//!
//! - **explicit**: `Client::swap` to a manifest whose selector slot names another plugin
//!   whose artifact is cached — load from the cache, instantiate, configure, self-check,
//!   give it the table and sets, switch. What `axle swap` costs inside the kernel.
//! - **file**: the manifest file rewritten (write + rename) until the watcher reports the
//!   new selector live — what a user sees after saving the manifest, including the
//!   watcher's quiet period for multi-step saves.
//!
//! The two selectors alternate (round-robin and p2c-ewma) so every round really loads one.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use axle::client::{Client, ClientConfig};
use axle::manifest::{EndpointSpec, Manifest};
use axle::plugin::PluginHost;
use axle::swap::{watch, Swapper};

/// Rounds measured per way.
const ROUNDS: usize = 20;

/// The result, per way: median, 90th percentile and worst, in microseconds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SwapBench {
    pub explicit_us: [u64; 3],
    pub file_us: [u64; 3],
    pub rounds: usize,
}

fn summary(mut v: Vec<u64>) -> [u64; 3] {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.9), at(1.0)]
}

/// The embedded manifest with `selector` in the selector slot and three endpoints for
/// `echo` (never called: a swap does not depend on traffic).
fn manifest_text(selector: &str) -> String {
    axle::manifest::defaults::EMBEDDED_MANIFEST.replacen(
        "selector = \"round-robin\"",
        &format!("selector = \"{selector}\""),
        1,
    )
}

/// Runs both measurements with `host`'s cache (warmed first, so no round compiles).
pub fn run(host: Arc<PluginHost>) -> anyhow::Result<SwapBench> {
    let dir = tempfile_dir()?;
    let path = dir.join("plugins.toml");
    std::fs::write(&path, manifest_text("round-robin"))?;
    let endpoints = (1..=3).map(|i| EndpointSpec::new(format!("127.0.0.1:{}", 9 + i)));
    let manifest = Manifest::load(&path)?;
    let client = Client::new(
        &host,
        ClientConfig::new(manifest.clone()).endpoints("echo", endpoints),
    )?;
    let selectors = ["p2c-ewma", "round-robin"];
    // Warm the cache: both selectors compiled once.
    for s in selectors {
        client.swap(&host, Manifest::parse(&manifest_text(s), "bench", &dir)?)?;
    }

    let mut explicit = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let next = Manifest::parse(&manifest_text(selectors[i % 2]), "bench", &dir)?;
        let started = Instant::now();
        client.swap(&host, next)?;
        explicit.push(started.elapsed().as_micros() as u64);
    }

    // Through the file: the client runs round-robin again first.
    client.swap(&host, Manifest::load(&path)?)?;
    let swapper = Arc::new(Swapper::new(host, Some(path.clone()), vec![client]));
    let (tx, rx) = mpsc::channel();
    let _watch = watch::start(swapper, move |r| {
        let _ = tx.send(r.as_ref().map(|_| ()).map_err(|e| format!("{e:#}")));
    })?;
    let mut file = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let tmp = dir.join("plugins.toml.tmp");
        std::fs::write(&tmp, manifest_text(selectors[i % 2]))?;
        let started = Instant::now();
        std::fs::rename(&tmp, &path)?;
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => file.push(started.elapsed().as_micros() as u64),
            Ok(Err(e)) => anyhow::bail!("a swap failed: {e}"),
            Err(_) => anyhow::bail!("the watcher did not report a swap within 30 s"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(SwapBench {
        explicit_us: summary(explicit),
        file_us: summary(file),
        rounds: ROUNDS,
    })
}

/// A fresh directory under the system's temp dir.
fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "axle-bench-swap-{}-{}",
        std::process::id(),
        axle::core::now_ns()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
