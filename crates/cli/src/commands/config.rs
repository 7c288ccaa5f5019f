//! `axle config explain SERVICE/METHOD`: the effective governance of one method, and the
//! tier each value came from (default, global, service, method).

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
