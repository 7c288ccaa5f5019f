//! Watches the manifest, the files it `extends` and the plugin files it names (inotify
//! through `notify`), and swaps when one changes. Editors save in several steps (write, rename, chmod): events
//! are gathered for a short quiet period, then the manifest is read once. A manifest that
//! no longer parses, or a plugin that fails to load, keeps the running plugins; the log
//! says why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use super::Swapper;
use axle_manifest::ComponentSource;

/// How long after the last event a change is considered complete.
const QUIET: Duration = Duration::from_millis(20);

/// A running watch; dropping it stops watching.
pub struct Watch {
    _watcher: notify::RecommendedWatcher,
}

/// Starts watching `swapper`'s manifest file and its plugin files. `on_swap` hears of
/// every attempt (for logs, tests and the admin endpoint).
pub fn start(
    swapper: Arc<Swapper>,
    on_swap: impl Fn(&anyhow::Result<super::SwapReport>) + Send + 'static,
) -> anyhow::Result<Watch> {
    let manifest = swapper
        .path()
        .ok_or_else(|| anyhow::anyhow!("nothing to watch: the embedded manifest runs"))?
        .to_path_buf();
    let (tx, rx) = mpsc::channel::<notify::Event>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(e) = event {
            let _ = tx.send(e);
        }
    })?;
    let dirs = watched(&manifest, &swapper);
    for dir in &dirs {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
    }
    std::thread::Builder::new()
        .name("axle-watch".into())
        .spawn(move || run(rx, manifest, swapper, on_swap))?;
    Ok(Watch { _watcher: watcher })
}

/// The directories to watch: the manifest's, its extended files', and each plugin
/// file's (files are often replaced by a rename, which a watch on the file itself would
/// miss).
fn watched(manifest: &Path, swapper: &Swapper) -> BTreeSet<PathBuf> {
    let mut dirs = BTreeSet::new();
    dirs.insert(parent(manifest));
    for path in plugin_files(swapper).iter().chain(&extended(manifest)) {
        dirs.insert(parent(path));
    }
    dirs
}

/// The files `manifest` extends, directly or through others (as of now).
fn extended(manifest: &Path) -> Vec<PathBuf> {
    axle_manifest::Manifest::layered(Some(manifest))
        .map(|l| {
            let files = l.layers.iter().skip(1).map(|l| PathBuf::from(&l.file));
            files.filter(|f| f != manifest).collect()
        })
        .unwrap_or_default()
}

fn plugin_files(swapper: &Swapper) -> Vec<PathBuf> {
    swapper
        .current()
        .map(|m| {
            m.plugins
                .values()
                .filter_map(|p| match &p.component {
                    ComponentSource::File(path) => Some(path.clone()),
                    ComponentSource::Builtin(_) => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn run(
    rx: mpsc::Receiver<notify::Event>,
    manifest: PathBuf,
    swapper: Arc<Swapper>,
    on_swap: impl Fn(&anyhow::Result<super::SwapReport>),
) {
    let same = |a: &Path, b: &Path| a.file_name() == b.file_name() && parent(a) == parent(b);
    while let Ok(first) = rx.recv() {
        let noticed = Instant::now();
        let mut events = vec![first];
        while let Ok(e) = rx.recv_timeout(QUIET) {
            events.push(e);
        }
        if events.iter().all(|e| e.kind.is_access()) {
            continue;
        }
        let mut files = plugin_files(&swapper);
        files.extend(extended(&manifest));
        let relevant = events
            .iter()
            .flat_map(|e| &e.paths)
            .any(|p| same(p, &manifest) || files.iter().any(|f| same(p, f)));
        if !relevant {
            continue;
        }
        let mut result = swapper.reload();
        if let Ok(report) = &mut result {
            report.took_us = noticed.elapsed().as_micros() as u64;
        }
        if let Err(e) = &result {
            tracing::error!(
                "the manifest changed but the swap failed; the running plugins stay: {e:#}"
            );
        }
        on_swap(&result);
    }
}
