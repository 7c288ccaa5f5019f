//! `axle rules put|get|history|rollback SERVICE`: a service's run-time rule in etcd
//! (`axle_discovery::rules`). A rule is checked against the manifest with
//! `axle_manifest::rules::apply` before it is stored, so what clients follow has passed
//! the same validation a manifest does; clients still check it again (etcd can be written
//! around this command) and keep their last good rules when it fails.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use axle::discovery::rules::{RuleVersion, Rules, MAX_RULE_BYTES};
use axle::discovery::RegistryUrl;
use axle::manifest::Manifest;

/// How many versions `history` shows without `--most`.
const DEFAULT_HISTORY: usize = 20;

/// `axle rules` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Check a rule against the manifest and store it as the service's new version.
    Put {
        #[command(flatten)]
        at: At,
        /// The rule's TOML file (default: read stdin).
        file: Option<PathBuf>,
    },
    /// Print the rule in force and its revision.
    Get {
        #[command(flatten)]
        at: At,
    },
    /// List the versions etcd still keeps, newest first.
    History {
        #[command(flatten)]
        at: At,
        /// At most this many versions.
        #[arg(long, default_value_t = DEFAULT_HISTORY)]
        most: usize,
    },
    /// Store the rule of revision REV again, as a new version (checked like `put`).
    Rollback {
        #[command(flatten)]
        at: At,
        /// The revision whose rule comes back (from `axle rules history`).
        revision: i64,
    },
}

/// Which rule: the service, where the registry is, the manifest rules are checked against.
#[derive(clap::Args)]
pub struct At {
    /// The service the rule is for.
    service: String,
    /// `etcd://HOST:PORT[,...]` (default: [discovery] registry).
    #[arg(long)]
    registry: Option<String>,
    /// The discovery namespace (default: [discovery] namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// The manifest (with its `extends` layers) a rule is laid over and checked against
    /// (default: the embedded one).
    #[arg(long)]
    manifest: Option<PathBuf>,
}

impl At {
    fn open(&self) -> anyhow::Result<Rules> {
        let manifest = Manifest::load_or_embedded(self.manifest.as_deref())?;
        let registry = match &self.registry {
            Some(url) => RegistryUrl::parse(url)?,
            None => manifest.discovery.registry.clone(),
        };
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| manifest.discovery.namespace.clone());
        Ok(Rules::open(
            &registry,
            manifest.backend_options(),
            &namespace,
        )?)
    }

    /// Refuses `text` unless it lays over the manifest into a valid manifest, and its
    /// route (if any) loads: the condition router parses its rules in `init`, so a bad
    /// one is refused here, not only by the clients that follow it.
    fn check(&self, text: &str) -> anyhow::Result<()> {
        let base = Manifest::layered(self.manifest.as_deref())?;
        let refused =
            |e: String| anyhow::anyhow!("the rule for `{}` is refused: {e}", self.service);
        let ruled = axle::manifest::rules::apply(&base, &self.service, text).map_err(refused)?;
        let route = axle::manifest::rules_route::route_plugin(&self.service);
        if let Some(spec) = ruled.plugins.get(&route) {
            let host = axle::plugin::PluginHost::new(None)?;
            host.load(spec)
                .map_err(|e| refused(format!("[route]: {}", e.reason)))?;
        }
        Ok(())
    }
}

pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Put { at, file } => {
            let text = read_rule(file.as_ref())?;
            at.check(&text)?;
            let revision = at.open()?.put(&at.service, &text).await?;
            println!("stored the rule of {} as revision {revision}", at.service);
        }
        Command::Get { at } => match at.open()?.get(&at.service).await? {
            Some(v) => print!("# revision {}\n{}", v.revision, ended(&v.text)),
            None => println!("# no rule for {}", at.service),
        },
        Command::History { at, most } => {
            let versions = at.open()?.history(&at.service, most).await?;
            print!("{}", render_history(&at.service, &versions));
        }
        Command::Rollback { at, revision } => {
            let rules = at.open()?;
            let old = rules
                .at(&at.service, revision)
                .await?
                .filter(|v| !v.text.is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!("{} had no rule at revision {revision}", at.service)
                })?;
            at.check(&old.text)?;
            let new = rules.put(&at.service, &old.text).await?;
            println!(
                "stored the rule of {} from revision {} as revision {new}",
                at.service, old.revision
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The rule from `file`, or stdin; bounded like what the registry stores.
fn read_rule(file: Option<&PathBuf>) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    let limit = MAX_RULE_BYTES as u64 + 1;
    match file {
        Some(path) => std::fs::File::open(path)
            .and_then(|f| f.take(limit).read_to_end(&mut bytes))
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
        None => std::io::stdin()
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow::anyhow!("cannot read the rule from stdin: {e}"))?,
    };
    anyhow::ensure!(
        bytes.len() <= MAX_RULE_BYTES,
        "a rule is at most {MAX_RULE_BYTES} bytes"
    );
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("a rule is UTF-8 text"))
}

/// `text` ending in a newline (for printing).
fn ended(text: &str) -> String {
    match text.ends_with('\n') || text.is_empty() {
        true => text.to_string(),
        false => format!("{text}\n"),
    }
}

/// One line per version: its revision, and its first line or that it was deleted. etcd
/// keeps no time with a revision, so none is shown.
fn render_history(service: &str, versions: &[RuleVersion]) -> String {
    let mut out = format!("versions of the rule of {service} (newest first; revision, start):\n");
    if versions.is_empty() {
        out += "none\n";
    }
    for v in versions {
        let first = v.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let what = match v.text.is_empty() {
            true => "(deleted)".to_string(),
            false => format!("{first} ({} lines)", v.text.lines().count()),
        };
        out += &format!("{:>10}  {what}\n", v.revision);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_names_each_revision_and_deletions() {
        let out = render_history(
            "echo",
            &[
                RuleVersion {
                    revision: 9,
                    text: String::new(),
                },
                RuleVersion {
                    revision: 7,
                    text: "\n[governance]\nretries = 0\n".into(),
                },
            ],
        );
        assert!(out.contains("         9  (deleted)"), "{out}");
        assert!(out.contains("         7  [governance] (3 lines)"), "{out}");
        assert!(render_history("echo", &[]).contains("none"));
    }
}
