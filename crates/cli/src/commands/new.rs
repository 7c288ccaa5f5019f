//! `axle plugins new --lang L --kind K NAME [--dir DIR]`: writes a plugin template that
//! builds and passes `axle plugins check` as generated: the strategy's source, the build
//! file its language needs, a `plugin.toml` manifest entry that loads the built component,
//! and a README with the exact build command.
//!
//! Rust templates build with plain `cargo build` and depend on the SDK by version
//! (`axle-sdk = "0.1.0"`), or on a checkout of it with `--sdk-path`: the SDK crate carries
//! the WIT package, so the plugin can live in a repository of its own. C, Python and JS
//! templates get a copy of the WIT package (`wit/`, embedded in this binary) for any WIT
//! toolchain (wit-bindgen, componentize-py, jco), and their README's build command is the
//! Axle repository's `xtask build-plugin` (the same recipes as the examples, built against
//! that `wit/`), whose path is written in (the repository this binary was built from
//! unless `--axle-repo` says otherwise).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

use super::templates::{self, KINDS, LANGS};

/// `axle plugins new` flags.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin's name (lowercase letters, digits and `-`, starting with a letter).
    name: String,
    /// The language: rust, c, python or js.
    #[arg(long, value_parser = Offered(&LANGS))]
    lang: String,
    /// The kind: serializer, selector, router, health-scorer, limiter or interceptor.
    #[arg(long, value_parser = Offered(&KINDS))]
    kind: String,
    /// Where to write it (default: `./NAME`). Must not exist or be empty.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The Axle repository the build commands of C, Python and JS plugins use (default:
    /// the one this binary was built from).
    #[arg(long)]
    axle_repo: Option<PathBuf>,
    /// Rust: depend on the SDK at this path (a checkout's `sdk/`, for working on the SDK
    /// itself) instead of `axle-sdk` by version.
    #[arg(long)]
    sdk_path: Option<PathBuf>,
}

/// A value parser that takes any text but names `.0` to `--help` and shell completions:
/// `run` refuses a name outside the list with the list (exit 1), the message the tests and
/// scripts already rely on, where clap's own check would exit 2 with another one.
#[derive(Clone)]
struct Offered(&'static [&'static str]);

impl clap::builder::TypedValueParser for Offered {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.0
                .iter()
                .map(|name| clap::builder::PossibleValue::new(*name)),
        ))
    }
}

/// The WIT package every plugin is built against, as it ships in the SDK crate.
const WIT: [(&str, &str); 2] = [
    (
        "wit/kinds.wit",
        include_str!("../../../../sdk/wit/kinds.wit"),
    ),
    (
        "wit/types.wit",
        include_str!("../../../../sdk/wit/types.wit"),
    ),
];

/// What a generated template's files are filled in with.
struct Fill {
    name: String,
    kind: String,
    lang: String,
    /// The Axle repository (C, Python and JS: their build command runs its `xtask`).
    repo: Option<PathBuf>,
    /// The SDK dependency's source, as a TOML inline-table body: `version = "..."` or
    /// `path = "..."`.
    sdk: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    if !LANGS.contains(&args.lang.as_str()) {
        bail!(
            "unknown language `{}` (languages: {})",
            args.lang,
            LANGS.join(", ")
        );
    }
    if !KINDS.contains(&args.kind.as_str()) {
        bail!("unknown kind `{}` (kinds: {})", args.kind, KINDS.join(", "));
    }
    // Only the C, Python and JS build commands name the repository (its `xtask`).
    let repo = match args.lang.as_str() {
        "rust" => None,
        _ => Some(axle_repo(args.axle_repo)?),
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists()
        && fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", dir.display());
    }

    let sdk = match &args.sdk_path {
        Some(path) => {
            if !path.join("Cargo.toml").is_file() || !path.join("wit/kinds.wit").is_file() {
                bail!(
                    "{} is not the Axle SDK (no Cargo.toml and wit/kinds.wit)",
                    path.display()
                );
            }
            let path = path
                .canonicalize()
                .with_context(|| format!("resolving {}", path.display()))?;
            format!("path = \"{}\"", toml_path(&path))
        }
        None => format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    let fill = Fill {
        name: args.name,
        kind: args.kind,
        lang: args.lang,
        repo,
        sdk,
    };
    let sources = templates::sources(&fill.lang, &fill.kind)
        .context("no template for this language and kind")?;
    let mut files: Vec<(String, String)> = sources
        .iter()
        .map(|f| (f.path.to_string(), fill.apply(f.text)))
        .collect();
    files.push(("plugin.toml".into(), fill.manifest_entry()));
    files.push(("README.md".into(), fill.readme()));
    if fill.lang == "rust" {
        files.push((".gitignore".into(), "/target\nCargo.lock\n".into()));
    } else {
        files.extend(WIT.iter().map(|(p, t)| (p.to_string(), t.to_string())));
    }
    for (path, text) in &files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "wrote a {} {} `{}` into {}",
        fill.lang,
        fill.kind,
        fill.name,
        dir.display()
    );
    println!("build:  (cd {} && {})", dir.display(), fill.build_command());
    println!(
        "check:  (cd {} && axle plugins check --manifest plugin.toml)",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The Axle repository whose `xtask build-plugin` builds C, Python and JS plugins.
fn axle_repo(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let repo = match given {
        Some(repo) => repo,
        // crates/cli sits two levels inside the repository.
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .context("the cli crate sits inside the repository")?
            .to_path_buf(),
    };
    if !repo.join("xtask/Cargo.toml").is_file() || !repo.join("sdk/wit/kinds.wit").is_file() {
        bail!(
            "{} is not the Axle repository (no xtask/, sdk/wit/): pass --axle-repo DIR",
            repo.display()
        );
    }
    repo.canonicalize()
        .with_context(|| format!("resolving {}", repo.display()))
}

/// A name that is a manifest key, a file stem and (for Rust) a crate name as it is.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && name.len() <= 64;
    if !ok {
        bail!(
            "invalid plugin name `{name}`: use lowercase letters, digits and `-`, \
             starting with a letter (at most 64 characters)"
        );
    }
    Ok(())
}

impl Fill {
    fn apply(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{crate}}", &self.name)
            .replace("{{kind}}", &self.kind)
            .replace("{{sdk}}", &self.sdk)
    }

    /// The component the build writes, relative to the plugin directory.
    fn component(&self) -> String {
        match self.lang.as_str() {
            // Cargo names the artifact after the library: `-` becomes `_`.
            "rust" => format!(
                "target/wasm32-wasip2/release/{}.wasm",
                self.name.replace('-', "_")
            ),
            _ => format!("{}.wasm", self.name),
        }
    }

    /// The one command that builds the component, run in the plugin directory.
    fn build_command(&self) -> String {
        match (self.lang.as_str(), &self.repo) {
            (lang, Some(repo)) => format!(
                "cargo run --release -q --manifest-path {} -p xtask -- build-plugin --lang {lang} . -o {}",
                shell_path(&repo.join("Cargo.toml")),
                self.component()
            ),
            _ => "cargo build --release --target wasm32-wasip2".to_string(),
        }
    }

    /// `[plugins.NAME]`: what a manifest needs to load the built component.
    fn manifest_entry(&self) -> String {
        // Interpreters start with megabytes of heap and their collectors can pause for
        // milliseconds (docs/authoring.md): more memory and a longer per-call budget.
        let limits = match self.lang.as_str() {
            "python" | "js" => "memory-mib = 128\ntimeout-ms = 1000\n",
            _ => "",
        };
        // The interceptor template is an access check: one that fails must not let every
        // caller through, so its entry fails closed (the kernel's default is to pass).
        let on_error = match self.kind.as_str() {
            "interceptor" => {
                "# An access check fails closed: a call it cannot judge is refused.\n\
                 on-error = \"refuse\"\n"
            }
            _ => "",
        };
        format!(
            "# The manifest entry that loads this plugin (docs/manifest.md). Check it as it is\n\
             # with `axle plugins check --manifest plugin.toml`, or copy it into a manifest\n\
             # (a relative `component` path resolves against the manifest's directory).\n\
             [plugins.{name}]\n\
             kind = \"{kind}\"\n\
             component = \"{component}\"\n\
             {limits}{on_error}",
            name = self.name,
            kind = self.kind,
            component = self.component(),
        )
    }

    fn readme(&self) -> String {
        let (what, files) = match self.lang.as_str() {
            "rust" => (
                "a Rust crate on the Axle SDK (`axle-sdk` in `Cargo.toml`, which carries the \
                 WIT package it builds against)",
                "`src/lib.rs`, `Cargo.toml`",
            ),
            "c" => (
                "C against the bindings `wit-bindgen c` generates for the world at build time \
                 (needs Debian's `clang lld wasi-libc libclang-rt-14-dev-wasm32`)",
                "`plugin.c`",
            ),
            "python" => (
                "Python for componentize-py (installed on first build into the Axle \
                 repository's `target/toolchains/py`; a build takes 25-45 s)",
                "`app.py`",
            ),
            _ => (
                "a JavaScript module for componentize-qjs (QuickJS) or componentize-js \
                 (StarlingMonkey), installed on first build into the Axle repository's \
                 `target/toolchains/js` (needs Node.js and npm)",
                "`app.js`",
            ),
        };
        let article = if self.kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "An"
        } else {
            "A"
        };
        let mut text = format!(
            "# {name}\n\n\
             {article} {kind} plugin for Axle, written in {what}. The source ({files}) says what \
             the strategy does and which config keys it takes; any other key fails the load.\n\n\
             Build (in this directory):\n\n\
             ```sh\n{build}\n```\n\n\
             The component is `{component}`. Check it (loads it, makes one real call through \
             each hot function):\n\n\
             ```sh\naxle plugins check --manifest plugin.toml\n```\n\n\
             `plugin.toml` is the manifest entry; copy it into your manifest to use the \
             plugin, and name it in a slot (`[slots]`, docs/manifest.md). How plugins are \
             written in each language: docs/authoring.md in the Axle repository.\n",
            name = self.name,
            kind = self.kind,
            build = self.build_command(),
            component = self.component(),
        );
        if let Some(notes) = templates::readme_notes(&self.kind) {
            text.push('\n');
            text.push_str(notes);
        }
        if self.lang == "js" {
            text.push_str(
                "\nThe command above builds with QuickJS (smaller, faster per call); with \
                 `--lang js-starlingmonkey` instead it builds with StarlingMonkey.\n",
            );
        }
        if self.lang == "rust" {
            text.push_str(&format!(
                "\nThe SDK dependency: `axle-sdk = {{ {} }}`. To build against a checkout of \
                 the SDK instead, generate with `--sdk-path PATH/TO/axle/sdk` or add \
                 `[patch.crates-io] axle-sdk = {{ path = \"...\" }}`.\n",
                self.sdk
            ));
        } else {
            text.push_str(&format!(
                "\n`wit/` is the WIT package this plugin implements (`axle:spi`, world \
                 `{kind}`), as the SDK ships it: any WIT toolchain builds against it \
                 (`wit-bindgen c`, `componentize-py -d wit -w {kind}`, `jco componentize \
                 --wit wit --world-name {kind}`). The command above is the Axle \
                 repository's recipe for it (`{repo}`), which also renames exports that \
                 clash with the language runtime's own symbols (docs/authoring.md).\n",
                kind = self.kind,
                repo = self.repo.as_deref().unwrap_or(Path::new("?")).display()
            ));
        }
        text
    }
}

/// A path as a TOML basic-string body (backslashes and quotes escaped).
fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// A path for a shell command line, quoted only when it needs to be.
fn shell_path(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_manifest_keys_and_crate_names() {
        for ok in ["rr", "my-selector", "a1"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1a", "My", "a_b", "a-", "a b", "../x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn help_and_completions_offer_every_kind_and_language_yet_any_name_parses() {
        use clap::{Args as _, FromArgMatches as _};
        let command = Args::augment_args(clap::Command::new("new"));
        for (flag, names) in [("kind", &KINDS[..]), ("lang", &LANGS[..])] {
            let arg = command
                .get_arguments()
                .find(|a| a.get_id() == flag)
                .expect("flag");
            let offered: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            assert_eq!(offered, names, "--{flag}");
        }
        assert!(KINDS.contains(&"interceptor"));
        // An unknown name reaches `run`, which refuses it with the list.
        let matches = command
            .try_get_matches_from(["new", "x", "--lang", "go", "--kind", "balancer"])
            .expect("any text parses");
        let args = Args::from_arg_matches(&matches).expect("args");
        let err = run(args).expect_err("unknown language refused");
        assert!(err.to_string().contains("unknown language `go`"), "{err}");
    }

    #[test]
    fn an_interceptor_readme_says_where_it_runs_what_it_reads_and_how_it_fails() {
        let fill = Fill {
            name: "gate".into(),
            kind: "interceptor".into(),
            lang: "c".into(),
            repo: Some(PathBuf::from("/axle")),
            sdk: String::new(),
        };
        let readme = fill.readme();
        assert!(
            readme.contains("\nAn interceptor plugin for Axle"),
            "{readme}"
        );
        // The build command stays the first sh block (what the tests and users run).
        let first = readme.find("```sh\n").expect("a sh block");
        assert!(readme[first..].starts_with(&format!("```sh\n{}\n```", fill.build_command())));
        for point in [
            "client-before",
            "client-after",
            "server-before",
            "server-after",
        ] {
            assert!(readme.contains(&format!("`{point}`")), "{point}");
        }
        for says in [
            "memoises",
            "per request shape",
            "`on-error`",
            "safe default",
        ] {
            // Whatever the line breaks.
            let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(flat.contains(says), "{says}");
        }
        // The access check fails closed; other kinds keep their fixed safe defaults.
        assert!(fill.manifest_entry().contains("\non-error = \"refuse\"\n"));
        let router = Fill {
            kind: "router".into(),
            ..fill
        };
        assert!(!router.readme().contains("memoises each answer"));
        assert!(!router.manifest_entry().contains("on-error"));
    }

    #[test]
    fn shell_paths_are_quoted_when_needed() {
        assert_eq!(shell_path(Path::new("/a/b-c")), "/a/b-c");
        assert_eq!(shell_path(Path::new("/a b/it's")), "'/a b/it'\\''s'");
    }
}
