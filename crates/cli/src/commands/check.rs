//! `axle plugins check`: load every plugin, self-check it, print a table. Exits non-zero
//! if any plugin fails, and says why. With `--manifest`, the plugins that manifest (and
//! the files it extends) declares or changes: the embedded ones are checked without it.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use axle::manifest::Manifest;
use axle::plugin::selfcheck;

pub fn run(manifest: Option<&Path>) -> anyhow::Result<ExitCode> {
    let manifest_path = manifest;
    let layered = Manifest::layered(manifest)?;
    let mut manifest = Manifest::from_layers(&layered)?;
    if let Some(path) = manifest_path {
        manifest
            .plugins
            .retain(|name, _| layered.written(&["plugins", name]));
        if manifest.plugins.is_empty() {
            println!("{} declares no plugins of its own", path.display());
        }
    }
    let host = crate::progress::plugin_host()?;
    println!("manifest: {}", manifest.file);
    println!(
        "{:<18} {:<14} {:>10} {:>22} {:>12}  status",
        "plugin", "kind", "size", "compile", "instantiate"
    );
    let mut failed = 0;
    let mut compile_total = Duration::ZERO;
    let mut hits = 0;
    for spec in manifest.plugins.values() {
        match host.load(spec) {
            Ok(loaded) => {
                let r = &loaded.report;
                compile_total += r.compile;
                hits += usize::from(r.cache_hit);
                let compile = format!(
                    "{} {}",
                    if r.cache_hit { "cache hit" } else { "compiled" },
                    super::duration(r.compile)
                );
                let status = match selfcheck::run(&loaded) {
                    Ok(()) => "ok".to_string(),
                    Err(e) => {
                        failed += 1;
                        format!("FAILED self-check: {e}")
                    }
                };
                println!(
                    "{:<18} {:<14} {:>10} {:>22} {:>12}  {status}",
                    spec.name,
                    spec.kind.as_str(),
                    super::size(r.size_bytes),
                    compile,
                    super::duration(r.instantiate),
                );
            }
            Err(e) => {
                failed += 1;
                println!(
                    "{:<18} {:<14} {:>10} {:>22} {:>12}  FAILED: {}",
                    spec.name,
                    spec.kind.as_str(),
                    "-",
                    "-",
                    "-",
                    e.reason
                );
                eprintln!("axle: {e}");
            }
        }
    }
    let total = manifest.plugins.len();
    println!(
        "{} of {total} plugins ok; compiling took {} in all ({hits} cache hits)",
        total - failed,
        super::duration(compile_total)
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
