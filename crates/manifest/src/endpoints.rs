//! `[services.<s>] endpoints = [...]`: provider lists, as addresses or tables. The same
//! syntax is a `file:` registry's providers file, so discovery gets [`parse_endpoints`].

use std::collections::BTreeMap;
use std::path::Path;

use axle_core::EndpointSpec;

use crate::raw::RawEndpoint;
use crate::{KeyError, Manifest};

/// Validates one service's list (`key` names it, e.g. `services.echo.endpoints`).
pub(crate) fn list(key: &str, raw: Vec<RawEndpoint>) -> Result<Vec<EndpointSpec>, KeyError> {
    let mut list = Vec::with_capacity(raw.len());
    for (i, e) in raw.into_iter().enumerate() {
        let spec = match e {
            RawEndpoint::Address(a) => EndpointSpec::new(a),
            RawEndpoint::Full(t) => EndpointSpec {
                address: t.address,
                weight: t.weight.unwrap_or(axle_core::endpoint::DEFAULT_WEIGHT),
                tags: t.tags.into_iter().collect(),
            },
        };
        axle_core::validate::address(&spec.address).map_err(|r| (format!("{key}[{i}]"), r))?;
        list.push(spec);
    }
    Ok(list)
}

/// A providers file's endpoint lists (the manifest syntax), for a `file:` registry.
pub fn parse_endpoints(
    text: &str,
    file: &str,
    base: &Path,
) -> Result<BTreeMap<String, Vec<EndpointSpec>>, String> {
    Manifest::parse(text, file, base)
        .map(|m| m.endpoints)
        .map_err(|e| e.to_string())
}
