//! The on-disk cache of compiled components (`docs/architecture.md`, "Plugin
//! principles"): compiling a small component takes ~25 ms, loading its artifact ~0.15 ms,
//! so a restart or a swap should never compile twice.
//!
//! A cached artifact is native code the kernel will run, so the cache is guarded:
//! - **A private directory.** It is created with mode 0700 and used only if it belongs to
//!   the user running the kernel and nobody else may write to it; otherwise the kernel
//!   compiles every time and says why. There is no shared fallback: without a cache
//!   directory of its own (no `$AXLE_CACHE_DIR`, no user cache directory) it compiles.
//! - **Verified before use.** An entry is a header (magic, BLAKE3 of the artifact) and the
//!   artifact; one whose hash does not match is discarded and rewritten, never
//!   deserialised.
//! - **Written safely.** Entries are written to a temporary file created exclusively
//!   (`create_new`, mode 0600) under an unpredictable name, then renamed, so a crash never
//!   leaves a torn artifact and no one can plant the temporary file in advance.
//!
//! Key: BLAKE3 of the component bytes + the engine's compatibility hash (wasmtime version,
//! target, every codegen setting) + the kernel's own version.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wasmtime::component::Component;
use wasmtime::Engine;

/// The first bytes of every entry.
const MAGIC: &[u8; 8] = b"AXLEART1";
/// Magic, then the artifact's BLAKE3.
const HEADER: usize = MAGIC.len() + 32;
/// The file name suffix of entries.
pub const SUFFIX: &str = "cwasm";

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

/// Makes `dir` (mode 0700 when created) and checks it is private to this user: `Err`
/// says why it may not hold artifacts.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!(
                "{} belongs to user {}, not to this user ({me})",
                dir.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} may be written by others (mode {:o}); `chmod go-w` it",
                dir.display(),
                meta.mode() & 0o777
            ));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
    }
}

impl ArtifactCache {
    /// A cache in `dir` (`None`, or a directory that is not private: compile every time).
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let dir = dir.filter(|d| match private_dir(d) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!("not caching compiled plugins: {why}");
                false
            }
        });
        ArtifactCache {
            dir,
            engine_key: engine_key(hasher.finish()),
        }
    }

    /// The part of an entry's name that says which engine it is for.
    pub fn engine_key(&self) -> &str {
        &self.engine_key
    }

    /// Where an artifact for `bytes` lives.
    fn path_for(&self, dir: &Path, bytes: &[u8]) -> PathBuf {
        let digest = blake3::hash(bytes);
        dir.join(format!(
            "{}-{}.{SUFFIX}",
            &digest.to_hex()[..32],
            self.engine_key
        ))
    }

    /// Compiles `bytes`, or loads the cached artifact.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Loaded> {
        self.load_or_compile(engine, bytes, || {})
    }

    /// As [`ArtifactCache::load`], calling `compiling` first when the cache has no
    /// artifact for `bytes` and they are compiled now (the slow case a caller may show).
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        compiling: impl FnOnce(),
    ) -> wasmtime::Result<Loaded> {
        let started = Instant::now();
        if let Some(dir) = &self.dir {
            let path = self.path_for(dir, bytes);
            if let Some(artifact) = read_verified(&path) {
                // SAFETY: the artifact was written by `Component::serialize` of an engine
                // with the same compatibility hash (it is in the file name), into a
                // directory private to this user, and its hash was just verified;
                // wasmtime checks its header again.
                match unsafe { Component::deserialize(engine, &artifact) } {
                    Ok(component) => {
                        return Ok(Loaded {
                            component,
                            how: Compiled::CacheHit,
                            elapsed: started.elapsed(),
                            artifact_bytes: Some((artifact.len() + HEADER) as u64),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "ignoring a cached artifact that does not load: {e:#}")
                    }
                }
            }
        }
        compiling();
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

    /// Writes the entry; returns its size.
    fn store(&self, dir: &Path, bytes: &[u8], component: &Component) -> anyhow::Result<u64> {
        let path = self.path_for(dir, bytes);
        let artifact = component
            .serialize()
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let tmp = dir.join(format!(
            ".tmp-{:016x}{:016x}",
            fastrand::u64(..),
            fastrand::u64(..)
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let written = (|| {
            let mut file = options.open(&tmp)?;
            file.write_all(MAGIC)?;
            file.write_all(blake3::hash(&artifact).as_bytes())?;
            file.write_all(&artifact)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        Ok((artifact.len() + HEADER) as u64)
    }
}

/// The artifact of entry `path`, if it is whole and its hash matches; a damaged entry is
/// removed.
fn read_verified(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let ok = data.len() > HEADER
        && data[..MAGIC.len()] == *MAGIC
        && blake3::hash(&data[HEADER..]).as_bytes()[..] == data[MAGIC.len()..HEADER];
    if !ok {
        tracing::warn!(path = %path.display(), "discarding a cached artifact that fails its check");
        let _ = std::fs::remove_file(path);
        return None;
    }
    Some(data[HEADER..].to_vec())
}

fn engine_key(hash: u64) -> String {
    format!("{hash:016x}")
}

/// What `axle cache prune` or `clear` removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub files: u64,
    pub bytes: u64,
}

/// Removes entries of `dir`: every entry and temporary file when `keep_engine` is
/// `None` (clear), else those for other engines (other wasmtime versions or settings)
/// and leftover temporary files (prune). Only Axle's own files are touched.
pub fn remove_entries(dir: &Path, keep_engine: Option<&str>) -> std::io::Result<Removed> {
    let mut removed = Removed::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        let ours = name.starts_with(".tmp-") || name.ends_with(&format!(".{SUFFIX}"));
        if !ours {
            continue;
        }
        let keep = match keep_engine {
            Some(key) => name.ends_with(&format!("-{key}.{SUFFIX}")),
            None => false,
        };
        if keep {
            continue;
        }
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::remove_file(entry.path())?;
        removed.files += 1;
        removed.bytes += len;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_entry_is_discarded_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cwasm");
        std::fs::write(&path, b"AXLEART1 not a hash, not an artifact....").unwrap();
        assert!(read_verified(&path).is_none());
        assert!(!path.exists(), "removed");
        let artifact = b"pretend artifact".to_vec();
        let mut whole = MAGIC.to_vec();
        whole.extend_from_slice(blake3::hash(&artifact).as_bytes());
        whole.extend_from_slice(&artifact);
        std::fs::write(&path, &whole).unwrap();
        assert_eq!(read_verified(&path), Some(artifact));
        whole[HEADER] ^= 1;
        std::fs::write(&path, &whole).unwrap();
        assert!(
            read_verified(&path).is_none(),
            "a flipped bit fails the check"
        );
    }

    #[cfg(unix)]
    #[test]
    fn only_a_private_directory_holds_artifacts() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("a/b");
        private_dir(&cache).unwrap();
        let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&cache)
            .unwrap_err()
            .contains("written by others"));
    }

    #[test]
    fn prune_keeps_this_engine_and_clear_removes_everything_of_ours() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a-k1.cwasm", "b-k2.cwasm", ".tmp-1234", "notes.txt"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(remove_entries(dir.path(), Some("k1")).unwrap().files, 2);
        assert!(dir.path().join("a-k1.cwasm").exists());
        assert_eq!(remove_entries(dir.path(), None).unwrap().files, 1);
        assert!(
            dir.path().join("notes.txt").exists(),
            "not ours: left alone"
        );
    }
}
