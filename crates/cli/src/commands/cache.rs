//! `axle cache dir | prune | clear`: the compiled-plugin cache.

use std::process::ExitCode;

use axle::plugin::cache::{private_dir, remove_entries};
use axle::plugin::{defaults, PluginHost};

/// Prints the directory, and whether the kernel would use it.
pub fn dir() -> anyhow::Result<ExitCode> {
    let Some(dir) = defaults::cache_dir() else {
        println!("(none: no $AXLE_CACHE_DIR and no user cache directory; plugins are compiled every time)");
        return Ok(ExitCode::SUCCESS);
    };
    match private_dir(&dir) {
        Ok(()) => println!("{}", dir.display()),
        Err(why) => println!("{} (not used: {why})", dir.display()),
    }
    Ok(ExitCode::SUCCESS)
}

/// `prune`: keeps what this axle can load; `clear`: removes every artifact.
pub fn remove(prune: bool) -> anyhow::Result<ExitCode> {
    let Some(dir) = defaults::cache_dir() else {
        println!("no cache directory: nothing to remove");
        return Ok(ExitCode::SUCCESS);
    };
    let keep = if prune {
        // The engine key of this build (wasmtime version, settings, axle version).
        let host = PluginHost::new(None)?;
        Some(host.cache().engine_key().to_string())
    } else {
        None
    };
    let removed = remove_entries(&dir, keep.as_deref())?;
    println!(
        "removed {} file(s), {} from {}",
        removed.files,
        super::size(removed.bytes as usize),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
