//! The on-disk cache of compiled components (`docs/architecture.md`, "Plugin principles"): compiling a small
//! component takes ~25 ms, loading its artifact ~0.15 ms, so a restart or a swap should
//! never compile twice.
//!
//! Key: BLAKE3 of the component bytes + the engine's compatibility hash (wasmtime version,
//! target, every codegen setting) + the kernel's own version. Entries are written to a
//! temporary file and renamed, so a crash never leaves a torn artifact; an entry that fails
//! to load is treated as a miss and rewritten.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wasmtime::component::Component;
use wasmtime::Engine;

/// How a component was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiled {
    /// Loaded from the cache.
    CacheHit,
    /// Compiled now (and stored, if the cache is writable).
    Compiled,
}

/// The result of [`ArtifactCache::load`].
pub struct Loaded {
    pub component: Component,
    pub how: Compiled,
    /// Time spent compiling or deserializing.
    pub elapsed: Duration,
    /// Size of the compiled artifact on disk (`None` without a cache directory, or when it
    /// could not be written): what a plugin costs in the cache, shown by the benches.
    pub artifact_bytes: Option<u64>,
}

/// A directory of compiled artifacts.
#[derive(Clone, Debug)]
pub struct ArtifactCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ArtifactCache {
    /// A cache in `dir` (`None`: compile every time).
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        ArtifactCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    /// Where an artifact for `bytes` lives.
    fn path_for(&self, dir: &Path, bytes: &[u8]) -> PathBuf {
        let digest = blake3::hash(bytes);
        dir.join(format!(
            "{}-{}.cwasm",
            &digest.to_hex()[..32],
            self.engine_key
        ))
    }

    /// Compiles `bytes`, or loads the cached artifact.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Loaded> {
        let started = Instant::now();
        if let Some(dir) = &self.dir {
            let path = self.path_for(dir, bytes);
            if path.exists() {
                // SAFETY: the file was written by `Component::serialize` of an engine
                // with the same compatibility hash (it is in the file name), into a
                // directory this kernel owns; wasmtime checks the header again.
                match unsafe { Component::deserialize_file(engine, &path) } {
                    Ok(component) => {
                        let elapsed = started.elapsed();
                        return Ok(Loaded {
                            component,
                            how: Compiled::CacheHit,
                            elapsed,
                            artifact_bytes: std::fs::metadata(&path).ok().map(|m| m.len()),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "ignoring a cached artifact that does not load: {e:#}")
                    }
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        let elapsed = started.elapsed();
        let mut artifact_bytes = None;
        if let Some(dir) = &self.dir {
            match self.store(dir, bytes, &component) {
                Ok(len) => artifact_bytes = Some(len),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), "cannot write the artifact cache: {e:#}")
                }
            }
        }
        Ok(Loaded {
            component,
            how: Compiled::Compiled,
            elapsed,
            artifact_bytes,
        })
    }

    /// Writes the artifact; returns its size.
    fn store(&self, dir: &Path, bytes: &[u8], component: &Component) -> anyhow::Result<u64> {
        std::fs::create_dir_all(dir)?;
        let path = self.path_for(dir, bytes);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let artifact = component
            .serialize()
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        std::fs::write(&tmp, &artifact)?;
        std::fs::rename(&tmp, &path)?;
        Ok(artifact.len() as u64)
    }
}
