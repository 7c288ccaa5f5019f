//! `axle config`: `explain SERVICE/METHOD` (the effective governance of one method, and
//! the tier each value came from), `check`, `show` and `schema`.

use std::path::Path;
use std::process::ExitCode;

use axle::manifest::Manifest;

pub fn explain(manifest: Option<&Path>, target: &str) -> anyhow::Result<ExitCode> {
    let (service, method) = target
        .split_once('/')
        .filter(|(s, m)| !s.is_empty() && !m.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the target is SERVICE/METHOD, got `{target}`"))?;
    let manifest = Manifest::load_or_embedded(manifest)?;
    let (_, rows) = manifest.governance_explained(service, method);
    println!("{service}/{method} ({})", manifest.file);
    println!("{:<30} {:<24} from", "key", "value");
    for (key, value, tier) in rows {
        println!("{key:<30} {value:<24} {tier}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `axle config check`: loads the manifest as `axle serve` would (layers, every key, every
/// plugin name, governance values) and checks the files it names, starting nothing and
/// compiling no plugin. `ok: PATH`, or every error and a non-zero exit.
pub fn check(manifest: Option<&Path>) -> anyhow::Result<ExitCode> {
    let name = manifest.map_or_else(
        || axle::manifest::defaults::EMBEDDED_MANIFEST_NAME.to_string(),
        |p| p.display().to_string(),
    );
    match Manifest::check(manifest) {
        Ok(_) => {
            println!("ok: {name}");
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("{e}");
            }
            eprintln!("axle config check: {} error(s) in {name}", errors.len());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `axle config show`: the effective manifest (the embedded defaults, the extends chain
/// and the file, merged), each value followed by the file it came from.
pub fn show(manifest: Option<&Path>) -> anyhow::Result<ExitCode> {
    let layered = Manifest::layered(manifest)?;
    print!("{}", layered.render());
    Ok(ExitCode::SUCCESS)
}

/// `axle config schema`: the manifest's JSON Schema (`docs/manifest.schema.json`).
pub fn schema() -> anyhow::Result<ExitCode> {
    print!("{}", axle::manifest::schema::json_schema());
    Ok(ExitCode::SUCCESS)
}
