//! `[services.<s>.weights]`: endpoint weights that override what discovery (or the
//! endpoint list) says, keyed by `host:port`. Written by hand or by a run-time rule's
//! `[weights]` table (`rules.rs`), which is how an operator shifts traffic between
//! providers without touching the registry. An address no endpoint has is kept (it takes
//! effect if the endpoint appears).

use std::collections::BTreeMap;

use crate::KeyError;

/// Largest weight (ten thousand times the default of 100).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Validates one service's table (`key` names it, e.g. `services.echo.weights`).
pub(crate) fn check(
    key: &str,
    raw: BTreeMap<String, u32>,
) -> Result<BTreeMap<String, u32>, KeyError> {
    for (address, weight) in &raw {
        axle_core::validate::address(address).map_err(|r| (format!("{key}.{address}"), r))?;
        if !(1..=MAX_WEIGHT).contains(weight) {
            return Err((
                format!("{key}.\"{address}\""),
                format!("must be between 1 and {MAX_WEIGHT} (got {weight})"),
            ));
        }
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use crate::Manifest;
    use std::path::Path;

    fn parse(text: &str) -> Result<Manifest, String> {
        Manifest::parse(text, "t.toml", Path::new("/")).map_err(|e| e.to_string())
    }

    #[test]
    fn weights_are_kept_per_service_and_checked() {
        let m = parse("[services.echo.weights]\n\"127.0.0.1:7301\" = 50\n").unwrap();
        assert_eq!(m.weight_overrides["echo"]["127.0.0.1:7301"], 50);
        let e = parse("[services.echo.weights]\n\"127.0.0.1:7301\" = 0\n").unwrap_err();
        assert!(e.contains("between 1 and 1000000 (got 0)"), "{e}");
        let e = parse("[services.echo.weights]\n\"no port\" = 5\n").unwrap_err();
        assert!(e.contains("services.echo.weights.no port"), "{e}");
        let e = parse("[services.echo.weights]\n\"127.0.0.1:1\" = \"heavy\"\n").unwrap_err();
        assert!(e.contains("weights"), "{e}");
    }
}
