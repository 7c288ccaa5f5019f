//! Layered manifests: a user manifest is laid over the embedded defaults, so it holds only
//! what differs. `extends = "PATH"` puts shared team defaults in between:
//! embedded ← the extends chain (its far end first) ← the file.
//!
//! Layers merge as TOML values before anything is deserialised, so every key keeps its
//! meaning: tables merge key by key, recursively; arrays and scalars are replaced whole.
//! Every value remembers the layer it came from, for `axle config show` and for errors
//! (which point into the file that wrote the offending value).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::locate::{self, Seg};
use crate::{defaults, ManifestError};

/// One manifest file (or the embedded text) in a layering.
#[derive(Clone, Debug)]
pub struct Layer {
    /// Its name in messages: the path as given, or `<embedded plugins.toml>`.
    pub file: String,
    /// Its text, kept to point errors at a line and column.
    pub text: String,
    /// Its folder: relative paths written in it resolve against this.
    pub base: PathBuf,
}

/// The merged manifest table, and where each value came from.
#[derive(Clone, Debug)]
pub struct Layered {
    /// The layers, most general first (the embedded defaults, when laid under).
    pub layers: Vec<Layer>,
    /// The effective table (without `extends`).
    pub table: toml::Table,
    /// For every key path, the index in `layers` of the last layer that wrote it.
    pub origins: BTreeMap<Vec<String>, usize>,
}

/// The key naming the file a manifest extends.
const EXTENDS: &str = "extends";

/// Keys whose values are paths, relative to the file that wrote them. A value that comes
/// from an extended file is made absolute here, so it still means what that file meant
/// once it is merged into a file elsewhere (`*` is any name).
const PATH_KEYS: &[&[&str]] = &[
    &["plugins", "*", "component"],
    &["tls", "cert-file"],
    &["tls", "key-file"],
    &["tls", "client-ca-file"],
    &["tls", "ca-file"],
    &["tls", "client-cert-file"],
    &["tls", "client-key-file"],
    &["discovery", "etcd", "ca-file"],
    &["discovery", "etcd", "cert-file"],
    &["discovery", "etcd", "key-file"],
    &["discovery", "etcd", "password-file"],
    &["discovery", "registry"],
];

/// The embedded layer.
pub fn embedded() -> Layer {
    Layer {
        file: defaults::EMBEDDED_MANIFEST_NAME.to_string(),
        text: defaults::EMBEDDED_MANIFEST.to_string(),
        base: PathBuf::from("."),
    }
}

/// The embedded defaults, then `path`'s extends chain, then `path`.
pub fn load(path: &Path) -> Result<Layered, ManifestError> {
    let mut chain = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    // The next file to read, and the layer whose `extends` named it.
    let mut next = Some((path.to_path_buf(), None::<Layer>));
    while let Some((file, extended_by)) = next.take() {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|e| match &extended_by {
            Some(by) => {
                let at = locate::in_text(&by.text, &[Seg::Key(EXTENDS.into())]);
                ManifestError::at(&by.file, EXTENDS, format!("cannot read `{name}`: {e}"), at)
            }
            None => ManifestError::at(&name, "(file)", format!("cannot read: {e}"), None),
        })?;
        let real = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
        // Only a file named by `extends` can be one already read.
        if let (true, Some(by)) = (seen.contains(&real), &extended_by) {
            let at = locate::in_text(&by.text, &[Seg::Key(EXTENDS.into())]);
            let mut cycle: Vec<String> = chain
                .iter()
                .map(|(l, _): &(Layer, _)| l.file.clone())
                .collect();
            cycle.push(name);
            return Err(ManifestError::at(
                &by.file,
                EXTENDS,
                format!("extends goes round in a circle: {}", cycle.join(" → ")),
                at,
            ));
        }
        seen.push(real);
        let layer = Layer {
            file: name,
            base: file.parent().unwrap_or(Path::new(".")).to_path_buf(),
            text,
        };
        let mut table = parse(&layer)?;
        if let Some(value) = table.remove(EXTENDS) {
            let at = locate::in_text(&layer.text, &[Seg::Key(EXTENDS.into())]);
            let Some(target) = value.as_str().filter(|t| !t.is_empty()) else {
                return Err(ManifestError::at(
                    &layer.file,
                    EXTENDS,
                    "must be the path of another manifest (a string)".into(),
                    at,
                ));
            };
            next = Some((layer.base.join(target), Some(layer.clone())));
        }
        chain.push((layer, table));
    }
    let mut layers = vec![(embedded(), parse(&embedded())?)];
    // The far end of the chain is the most general; its relative paths are made absolute.
    let top = chain.len() - 1;
    for (i, (layer, mut table)) in chain.into_iter().rev().enumerate() {
        if i < top {
            rebase(&mut table, &layer.base);
        }
        layers.push((layer, table));
    }
    Ok(merge(layers))
}

/// One text alone, not laid over anything (a whole manifest, as `Manifest::parse` takes).
pub fn alone(layer: Layer) -> Result<Layered, ManifestError> {
    let table = parse(&layer)?;
    if table.contains_key(EXTENDS) {
        let at = locate::in_text(&layer.text, &[Seg::Key(EXTENDS.into())]);
        return Err(ManifestError::at(
            &layer.file,
            EXTENDS,
            "only a manifest loaded from a file may extend another".into(),
            at,
        ));
    }
    Ok(merge(vec![(layer, table)]))
}

/// A layer's text as a TOML table; a syntax error points at its line and column.
fn parse(layer: &Layer) -> Result<toml::Table, ManifestError> {
    layer.text.parse().map_err(|e: toml::de::Error| {
        let at = e.span().map(|s| locate::line_col(&layer.text, s.start));
        let message = e.message().trim_end().to_string();
        ManifestError::at(
            &layer.file,
            "(toml)",
            format!("not valid TOML: {message}"),
            at,
        )
    })
}

/// Lays each layer over the ones before it, remembering who wrote what.
pub fn merge(layers: Vec<(Layer, toml::Table)>) -> Layered {
    let mut table = toml::Table::new();
    let mut origins = BTreeMap::new();
    let mut kept = Vec::with_capacity(layers.len());
    for (index, (layer, over)) in layers.into_iter().enumerate() {
        merge_table(&mut table, over, &mut Vec::new(), index, &mut origins);
        kept.push(layer);
    }
    Layered {
        layers: kept,
        table,
        origins,
    }
}

fn merge_table(
    under: &mut toml::Table,
    over: toml::Table,
    path: &mut Vec<String>,
    layer: usize,
    origins: &mut BTreeMap<Vec<String>, usize>,
) {
    for (key, value) in over {
        path.push(key.clone());
        match (under.get_mut(&key), value) {
            (Some(toml::Value::Table(u)), toml::Value::Table(o)) => {
                merge_table(u, o, path, layer, origins);
            }
            (_, value) => {
                // A replaced value's old children no longer exist.
                origins.retain(|k, _| !(k.len() > path.len() && k.starts_with(path)));
                record(&value, path, layer, origins);
                under.insert(key, value);
            }
        }
        origins.insert(path.clone(), layer);
        path.pop();
    }
}

/// Every key under a value just written comes from `layer`.
fn record(
    value: &toml::Value,
    path: &mut Vec<String>,
    layer: usize,
    origins: &mut BTreeMap<Vec<String>, usize>,
) {
    if let toml::Value::Table(t) = value {
        for (key, v) in t {
            path.push(key.clone());
            record(v, path, layer, origins);
            origins.insert(path.clone(), layer);
            path.pop();
        }
    }
}

/// Makes the relative paths of [`PATH_KEYS`] in `table` absolute against `base`.
fn rebase(table: &mut toml::Table, base: &Path) {
    for pattern in PATH_KEYS {
        rebase_at(table, pattern, base);
    }
}

fn rebase_at(table: &mut toml::Table, pattern: &[&str], base: &Path) {
    let Some((first, rest)) = pattern.split_first() else {
        return;
    };
    let keys: Vec<String> = match *first {
        "*" => table.keys().cloned().collect(),
        key => vec![key.to_string()],
    };
    for key in keys {
        match (table.get_mut(&key), rest.is_empty()) {
            (Some(toml::Value::Table(inner)), false) => rebase_at(inner, rest, base),
            (Some(toml::Value::String(s)), true) => {
                if let Some(rebased) = rebase_one(s, base) {
                    *s = rebased;
                }
            }
            _ => {}
        }
    }
}

/// `s` made absolute against `base`, if it is a relative path (`builtin:` components and
/// registries other than `file:` are not paths).
fn rebase_one(s: &str, base: &Path) -> Option<String> {
    if s.starts_with("builtin:") || s.contains("://") || s == "static" {
        return None;
    }
    let (prefix, path) = match s.strip_prefix("file:") {
        Some(p) => ("file:", p),
        None => ("", s),
    };
    if path.is_empty() || Path::new(path).is_absolute() {
        return None;
    }
    let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
    Some(format!("{prefix}{}", base.join(path).display()))
}

impl Layered {
    /// The layer that wrote `path` (a key path, array indices included), or the nearest
    /// enclosing key it has a record of; the last layer when there is none.
    pub fn origin(&self, path: &[Seg]) -> usize {
        let keys: Vec<String> = path
            .iter()
            .map_while(|s| match s {
                Seg::Key(k) => Some(k.clone()),
                Seg::Index(_) => None,
            })
            .collect();
        (0..=keys.len())
            .rev()
            .find_map(|n| self.origins.get(&keys[..n]).copied())
            .unwrap_or(self.layers.len().saturating_sub(1))
    }

    /// Whether a file wrote (or changed something under) `path`, rather than the
    /// embedded defaults alone: what a user declared, e.g. the plugins worth checking.
    pub fn written(&self, path: &[&str]) -> bool {
        let path: Vec<String> = path.iter().map(|k| k.to_string()).collect();
        self.origins
            .get(&path)
            .and_then(|i| self.layers.get(*i))
            .is_some_and(|l| l.file != defaults::EMBEDDED_MANIFEST_NAME)
    }

    /// An error at `path`, pointed at the line and column of the layer that wrote it.
    pub fn error_at(&self, path: &[Seg], reason: String) -> ManifestError {
        let key = locate::dotted(path);
        let key = if key.is_empty() {
            "(top level)".to_string()
        } else {
            key
        };
        match self.layers.get(self.origin(path)) {
            Some(layer) => {
                let at = locate::nearest(&layer.text, path);
                ManifestError::at(&layer.file, &key, reason, at)
            }
            None => ManifestError::at("(no manifest)", &key, reason, None),
        }
    }
}
