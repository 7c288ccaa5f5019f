//! `axle config check`: everything loading checks, plus the files the manifest names —
//! plugin components, TLS certificates and keys, etcd's files — without starting anything
//! or compiling a plugin. Files are read only when something starts, so a missing one
//! would otherwise surface at deploy time, not at review time.

use std::path::{Path, PathBuf};

use axle_discovery::config::PasswordSource;

use crate::locate::parse_dotted;
use crate::{ComponentSource, Layered, Manifest, ManifestError};

impl Manifest {
    /// Loads `path` (or the embedded manifest) and checks that every file it names exists.
    /// Returns every missing file, or the first error that stopped loading.
    pub fn check(path: Option<&Path>) -> Result<Manifest, Vec<ManifestError>> {
        let layered = Manifest::layered(path).map_err(|e| vec![e])?;
        let manifest = Manifest::from_layers(&layered).map_err(|e| vec![e])?;
        let errors: Vec<ManifestError> = named_files(&manifest)
            .into_iter()
            .filter_map(|(key, file)| missing(&layered, &key, &file))
            .collect();
        if errors.is_empty() {
            Ok(manifest)
        } else {
            Err(errors)
        }
    }
}

/// Every file the manifest names, with the key that names it.
fn named_files(m: &Manifest) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    for (name, spec) in &m.plugins {
        if let ComponentSource::File(f) = &spec.component {
            files.push((format!("plugins.{name}.component"), f.clone()));
        }
    }
    if let Some(s) = &m.tls.server {
        files.push(("tls.cert-file".into(), s.cert.clone()));
        files.push(("tls.key-file".into(), s.key.clone()));
        files.extend(
            s.client_ca
                .clone()
                .map(|f| ("tls.client-ca-file".into(), f)),
        );
    }
    if let Some(c) = &m.tls.client {
        files.push(("tls.ca-file".into(), c.ca.clone()));
        files.extend(c.cert.clone().map(|f| ("tls.client-cert-file".into(), f)));
        files.extend(c.key.clone().map(|f| ("tls.client-key-file".into(), f)));
    }
    let etcd = &m.discovery.etcd;
    for (key, file) in [
        ("ca-file", &etcd.ca_file),
        ("cert-file", &etcd.cert_file),
        ("key-file", &etcd.key_file),
    ] {
        files.extend(file.clone().map(|f| (format!("discovery.etcd.{key}"), f)));
    }
    if let Some(PasswordSource::File(f)) = &etcd.password {
        files.push(("discovery.etcd.password-file".into(), f.clone()));
    }
    files
}

/// An error at `key` if `file` is not a readable file.
fn missing(layered: &Layered, key: &str, file: &Path) -> Option<ManifestError> {
    let reason = match std::fs::metadata(file) {
        Ok(m) if m.is_file() => return None,
        Ok(_) => format!("{} is not a file", file.display()),
        Err(e) => format!("{}: {e}", file.display()),
    };
    Some(layered.error_at(&parse_dotted(key), reason))
}
