//! `check-layout`: the rules the workspace layout must keep, as pure functions over
//! already-read data (`cargo metadata` output, line counts), so they can be unit tested.
//! `main` does the I/O and prints what these return.
//!
//! - Crate layering: every package under `crates/` has a layer in [`LAYERS`], and its
//!   normal and build dependencies only reach strictly lower layers (dev-dependencies may
//!   reach up: tests can use anything). No dependency cycles among workspace packages.
//! - Library crates (all of [`LAYERS`] but [`NOT_LIBRARIES`]) stay free of CLI, gRPC and
//!   bench dependencies ([`LIBRARY_FORBIDDEN`]) and of the native plugin crates under
//!   `plugins/`.
//! - No non-test `.rs` file under [`SIZE_ROOTS`] is longer than [`LINE_LIMIT`] lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

/// The crates under `crates/`: (package name, layer, role). Lower layer = lower level; a
/// crate may depend only on crates of a strictly lower layer.
pub const LAYERS: &[(&str, u32, &str)] = &[
    (
        "axle-spi",
        0,
        "native SPI types shared by guest SDK and host",
    ),
    (
        "axle-core",
        1,
        "clock, ids, validators, request scope, EWMA, latency histogram, payload model",
    ),
    ("axle-wire", 1, "frames and codec"),
    (
        "axle-governance",
        2,
        "policy tiers, breakers, budgets, guards",
    ),
    (
        "axle-builtins",
        1,
        "the shipped plugins built for wasm32-wasip2, embedded",
    ),
    (
        "axle-facts",
        2,
        "per-endpoint facts: in-flight, latency EWMA, outcome windows",
    ),
    (
        "axle-transport",
        2,
        "multiplexed TCP connections, per-endpoint re-dialling",
    ),
    (
        "axle-discovery",
        2,
        "discovery backends: static list, file, etcd",
    ),
    (
        "axle-plugin-host",
        3,
        "loads and calls plugin components (wasmtime)",
    ),
    (
        "axle-manifest",
        4,
        "the manifest (`plugins.toml`): plugins, config, slots",
    ),
    ("axle-client", 5, "the calling side: pick, attempt, retry"),
    ("axle-server", 5, "the providing side: serve pipeline"),
    (
        "axle-swap",
        6,
        "hot-swap: a running kernel's plugins replaced while traffic flows",
    ),
    ("axle-admin", 7, "the admin endpoint (`axle.admin`)"),
    ("axle", 8, "the facade: re-exports, exposure, demo services"),
    (
        "axle-gateway",
        9,
        "the HTTP face: `axle gateway` and `axle sidecar`",
    ),
    (
        "axle-sim",
        9,
        "the strategy lab (`axle sim`): simulated providers, the kernel's own decisions",
    ),
    ("axle-bench", 10, "benchmarks (`axle bench`)"),
    ("axle-cli", 11, "the `axle` binary"),
];

/// The crates of [`LAYERS`] that are not libraries: they may use the dependencies of
/// [`LIBRARY_FORBIDDEN`] and the native plugin crates.
pub const NOT_LIBRARIES: &[&str] = &["axle-bench", "axle-cli"];

/// What a library crate must not depend on (normal dependencies).
pub const LIBRARY_FORBIDDEN: &[&str] = &["clap", "tonic", "hdrhistogram", "criterion"];

/// The directories (relative to the workspace root) whose `.rs` files have a size limit.
pub const SIZE_ROOTS: &[&str] = &["crates", "sdk", "xtask", "plugins", "host-tests/src"];

/// The most lines a non-test `.rs` file under [`SIZE_ROOTS`] may have.
pub const LINE_LIMIT: usize = 600;

/// The layer of package `name`, if [`LAYERS`] has one.
pub fn layer_of(name: &str) -> Option<u32> {
    LAYERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, layer, _)| *layer)
}

/// The part of `cargo metadata --format-version 1 --no-deps` the checks read.
#[derive(Debug, Clone)]
pub struct Metadata {
    pub workspace_root: PathBuf,
    /// The workspace members.
    pub packages: Vec<Package>,
}

#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub manifest_path: PathBuf,
    pub dependencies: Vec<Dependency>,
}

#[derive(Debug, Clone)]
pub struct Dependency {
    /// The package name (not the `rename`d one).
    pub name: String,
    pub kind: DepKind,
    /// The dependency's directory, for path dependencies.
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    Normal,
    Build,
    Dev,
}

impl Metadata {
    /// Parses the JSON `cargo metadata --format-version 1` prints.
    pub fn parse(json: &str) -> Result<Metadata> {
        let v: Value = serde_json::from_str(json).context("cargo metadata: not JSON")?;
        let workspace_root = PathBuf::from(str_field(&v, "workspace_root")?);
        let packages = v["packages"]
            .as_array()
            .context("cargo metadata: no `packages` array")?
            .iter()
            .map(Package::parse)
            .collect::<Result<_>>()?;
        Ok(Metadata {
            workspace_root,
            packages,
        })
    }

    /// The packages whose manifest lies under `<root>/crates/`, in name order.
    fn crates(&self) -> Vec<&Package> {
        let dir = self.workspace_root.join("crates");
        let mut crates: Vec<&Package> = self
            .packages
            .iter()
            .filter(|p| p.manifest_path.starts_with(&dir))
            .collect();
        crates.sort_by(|a, b| a.name.cmp(&b.name));
        crates
    }
}

impl Package {
    fn parse(v: &Value) -> Result<Package> {
        let name = str_field(v, "name")?.to_string();
        let dependencies = v["dependencies"]
            .as_array()
            .with_context(|| format!("cargo metadata: package {name} has no `dependencies`"))?
            .iter()
            .map(|d| {
                let kind = match d["kind"].as_str() {
                    None => DepKind::Normal,
                    Some("build") => DepKind::Build,
                    Some("dev") => DepKind::Dev,
                    Some(other) => anyhow::bail!("dependency kind {other:?} of {name}"),
                };
                Ok(Dependency {
                    name: str_field(d, "name")?.to_string(),
                    kind,
                    path: d["path"].as_str().map(PathBuf::from),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Package {
            manifest_path: PathBuf::from(str_field(v, "manifest_path")?),
            name,
            dependencies,
        })
    }

    /// Dependencies that are part of what the package builds: normal and build.
    fn build_edges(&self) -> impl Iterator<Item = &Dependency> {
        self.dependencies.iter().filter(|d| d.kind != DepKind::Dev)
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v[key]
        .as_str()
        .with_context(|| format!("cargo metadata: no string `{key}`"))
}

/// Crates under `crates/` without a layer, and normal/build edges that do not go to a
/// strictly lower layer.
pub fn layering(meta: &Metadata) -> Vec<String> {
    let mut violations = Vec::new();
    for krate in meta.crates() {
        let Some(layer) = layer_of(&krate.name) else {
            violations.push(format!(
                "crate {} under crates/ has no layer in xtask/src/layout.rs",
                krate.name
            ));
            continue;
        };
        let targets: BTreeSet<&str> = krate.build_edges().map(|d| d.name.as_str()).collect();
        for target in targets {
            match layer_of(target) {
                Some(to) if to >= layer => violations.push(format!(
                    "upward edge: {} (layer {layer}) -> {target} (layer {to})",
                    krate.name
                )),
                _ => {}
            }
        }
    }
    violations
}

/// Library crates under `crates/` with a normal dependency on [`LIBRARY_FORBIDDEN`] or on
/// a package under `<root>/plugins/`.
pub fn library_dependencies(meta: &Metadata) -> Vec<String> {
    let plugins = meta.workspace_root.join("plugins");
    let plugin_packages: BTreeSet<&str> = meta
        .packages
        .iter()
        .filter(|p| p.manifest_path.starts_with(&plugins))
        .map(|p| p.name.as_str())
        .collect();
    let mut violations = Vec::new();
    for krate in meta.crates() {
        if layer_of(&krate.name).is_none() || NOT_LIBRARIES.contains(&krate.name.as_str()) {
            continue;
        }
        let forbidden: BTreeSet<&str> = krate
            .dependencies
            .iter()
            .filter(|d| d.kind == DepKind::Normal)
            .filter(|d| {
                LIBRARY_FORBIDDEN.contains(&d.name.as_str())
                    || plugin_packages.contains(d.name.as_str())
                    || d.path.as_ref().is_some_and(|p| p.starts_with(&plugins))
            })
            .map(|d| d.name.as_str())
            .collect();
        for dep in forbidden {
            violations.push(format!("library crate {} depends on {dep}", krate.name));
        }
    }
    violations
}

/// Dependency cycles among workspace packages over normal and build edges, each as
/// `cycle: a -> b -> a`.
pub fn cycles(meta: &Metadata) -> Vec<String> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = meta
        .packages
        .iter()
        .map(|p| (p.name.as_str(), BTreeSet::new()))
        .collect();
    for p in &meta.packages {
        let edges: Vec<&str> = p
            .build_edges()
            .map(|d| d.name.as_str())
            .filter(|n| graph.contains_key(n))
            .collect();
        graph.entry(p.name.as_str()).or_default().extend(edges);
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        stack: &mut Vec<&'a str>,
        found: &mut Vec<String>,
    ) {
        marks.insert(node, Mark::OnStack);
        stack.push(node);
        for &next in &graph[node] {
            match marks[next] {
                Mark::New => visit(next, graph, marks, stack, found),
                Mark::OnStack => {
                    let start = stack.iter().position(|&n| n == next).unwrap_or(0);
                    let mut path = stack[start..].to_vec();
                    path.push(next);
                    found.push(format!("dependency cycle: {}", path.join(" -> ")));
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        marks.insert(node, Mark::Done);
    }

    let mut marks: BTreeMap<&str, Mark> = graph.keys().map(|&n| (n, Mark::New)).collect();
    let mut found = Vec::new();
    for &node in graph.keys() {
        if marks[node] == Mark::New {
            visit(node, &graph, &mut marks, &mut Vec::new(), &mut found);
        }
    }
    found
}

/// Whether `rel` (a path relative to the workspace root) is a `.rs` file under the size
/// limit: under [`SIZE_ROOTS`], not in a `target/` directory, not a test file (named
/// `tests.rs`, in a `tests/` directory, or under `benches/`).
pub fn size_checked(rel: &Path) -> bool {
    let in_roots = SIZE_ROOTS.iter().any(|root| rel.starts_with(root));
    let names: Vec<&str> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let (dirs, file) = match names.split_last() {
        Some((file, dirs)) => (dirs, *file),
        None => return false,
    };
    in_roots
        && file.ends_with(".rs")
        && file != "tests.rs"
        && !dirs
            .iter()
            .any(|d| matches!(*d, "target" | "tests" | "benches"))
}

/// The files of `files` (path relative to the workspace root, line count) that
/// [`size_checked`] covers and that have more than [`LINE_LIMIT`] lines.
pub fn file_sizes(files: &[(PathBuf, usize)]) -> Vec<String> {
    let mut files: Vec<&(PathBuf, usize)> = files.iter().collect();
    files.sort();
    files
        .into_iter()
        .filter(|(path, lines)| *lines > LINE_LIMIT && size_checked(path))
        .map(|(path, lines)| format!("{}: {lines} lines (limit {LINE_LIMIT})", path.display()))
        .collect()
}

/// Every violation: layering, library dependencies, cycles, file sizes.
pub fn violations(meta: &Metadata, files: &[(PathBuf, usize)]) -> Vec<String> {
    let mut all = layering(meta);
    all.extend(library_dependencies(meta));
    all.extend(cycles(meta));
    all.extend(file_sizes(files));
    all
}

/// The number of workspace packages under `crates/` (for the summary line).
pub fn crate_count(meta: &Metadata) -> usize {
    meta.crates().len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A package under `/ws/<dir>/`, with `(name, kind, path)` dependencies.
    fn package(name: &str, dir: &str, deps: &[(&str, Option<&str>, Option<&str>)]) -> Value {
        json!({
            "name": name,
            "manifest_path": format!("/ws/{dir}/Cargo.toml"),
            "dependencies": deps.iter().map(|(n, kind, path)| json!({
                "name": n,
                "kind": kind,
                "path": path.map(|p| format!("/ws/{p}")),
            })).collect::<Vec<_>>(),
        })
    }

    fn metadata(packages: Vec<Value>) -> Metadata {
        let json = json!({ "workspace_root": "/ws", "packages": packages }).to_string();
        Metadata::parse(&json).unwrap()
    }

    fn clean() -> Vec<Value> {
        vec![
            package("axle-spi", "crates/spi", &[("serde", None, None)]),
            package(
                "axle-core",
                "crates/core",
                &[
                    ("axle-spi", None, Some("crates/spi")),
                    // Tests may reach up.
                    ("axle", Some("dev"), Some("crates/axle")),
                ],
            ),
            package(
                "axle",
                "crates/axle",
                &[
                    ("axle-core", None, Some("crates/core")),
                    ("axle-spi", Some("build"), Some("crates/spi")),
                ],
            ),
            package(
                "axle-cli",
                "crates/cli",
                &[
                    ("axle", None, Some("crates/axle")),
                    ("clap", None, None),
                    ("axle-plugin-json", None, Some("plugins/serializer-json")),
                ],
            ),
            package("axle-plugin-json", "plugins/serializer-json", &[]),
            // Not under crates/: no layer needed.
            package("xtask", "xtask", &[("anyhow", None, None)]),
        ]
    }

    #[test]
    fn clean_graph_passes() {
        let files = vec![
            (PathBuf::from("crates/core/src/lib.rs"), 600),
            (PathBuf::from("crates/core/src/tests.rs"), 900),
        ];
        assert_eq!(violations(&metadata(clean()), &files), Vec::<String>::new());
        assert_eq!(crate_count(&metadata(clean())), 4);
    }

    #[test]
    fn upward_edge_is_reported() {
        let mut packages = clean();
        packages[0] = package(
            "axle-spi",
            "crates/spi",
            &[("axle-core", Some("build"), Some("crates/core"))],
        );
        packages.push(package(
            "axle-wire",
            "crates/wire",
            &[("axle-core", None, Some("crates/core"))],
        ));
        assert_eq!(
            layering(&metadata(packages)),
            [
                "upward edge: axle-spi (layer 0) -> axle-core (layer 1)",
                "upward edge: axle-wire (layer 1) -> axle-core (layer 1)",
            ]
        );
    }

    #[test]
    fn missing_layer_is_reported() {
        let mut packages = clean();
        packages.push(package("axle-extra", "crates/extra", &[]));
        assert_eq!(
            violations(&metadata(packages), &[]),
            ["crate axle-extra under crates/ has no layer in xtask/src/layout.rs"]
        );
    }

    #[test]
    fn cycle_is_reported_with_its_path() {
        let packages = vec![
            package("a", "x/a", &[("b", None, Some("x/b"))]),
            package("b", "x/b", &[("c", Some("build"), Some("x/c"))]),
            package("c", "x/c", &[("a", None, Some("x/a"))]),
            // A dev edge does not close a cycle.
            package("d", "x/d", &[("a", None, Some("x/a"))]),
            package("e", "x/e", &[("d", Some("dev"), Some("x/d"))]),
        ];
        assert_eq!(
            cycles(&metadata(packages)),
            ["dependency cycle: a -> b -> c -> a"]
        );
        assert!(cycles(&metadata(clean())).is_empty());
    }

    #[test]
    fn forbidden_library_dependencies_are_reported() {
        let mut packages = clean();
        packages[2] = package(
            "axle",
            "crates/axle",
            &[
                ("axle-core", None, Some("crates/core")),
                ("tonic", None, None),
                ("axle-plugin-json", None, Some("plugins/serializer-json")),
                // Only normal dependencies count.
                ("criterion", Some("dev"), None),
            ],
        );
        assert_eq!(
            library_dependencies(&metadata(packages)),
            [
                "library crate axle depends on axle-plugin-json",
                "library crate axle depends on tonic",
            ]
        );
    }

    #[test]
    fn oversized_files_are_reported_unless_tests() {
        let files: Vec<(PathBuf, usize)> = [
            ("crates/core/src/big.rs", 601),
            ("sdk/src/lib.rs", 700),
            ("host-tests/src/lib.rs", 650),
            ("crates/core/src/tests.rs", 900),
            ("crates/core/tests/it.rs", 900),
            ("crates/core/src/tests/helpers.rs", 900),
            ("crates/bench/benches/rpc.rs", 900),
            ("crates/wire/fuzz/target/debug/build/x/out.rs", 900),
            ("host-tests/tests/big.rs", 900),
            ("kernel/src/old.rs", 900),
            ("crates/core/README.md", 900),
        ]
        .iter()
        .map(|(p, n)| (PathBuf::from(p), *n))
        .collect();
        assert_eq!(
            file_sizes(&files),
            [
                "crates/core/src/big.rs: 601 lines (limit 600)",
                "host-tests/src/lib.rs: 650 lines (limit 600)",
                "sdk/src/lib.rs: 700 lines (limit 600)",
            ]
        );
    }

    #[test]
    fn layer_table_names_are_unique() {
        let names: BTreeSet<&str> = LAYERS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names.len(), LAYERS.len());
        assert!(NOT_LIBRARIES.iter().all(|n| layer_of(n).is_some()));
    }
}
