//! The address and name checks every input goes through (manifest, discovery, command
//! line), so that what one accepts the others accept too.

/// `host:port` with a non-empty host and a numeric port.
pub fn address(address: &str) -> Result<(), String> {
    match address.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("`{address}` is not host:port")),
    }
}

/// A name (plugin, service, group, namespace): non-empty, at most 128 bytes, ASCII letters,
/// digits, `-`, `_` and `.` only, so it can be a registry path segment and a log field.
pub fn name(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if value.len() > 128 {
        return Err(format!("the {what} `{value}` is longer than 128 bytes"));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "the {what} `{value}` may hold only ASCII letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses() {
        assert!(super::address("127.0.0.1:7300").is_ok());
        assert!(super::address("[::1]:80").is_ok());
        for bad in ["", ":80", "host", "host:", "host:99999", "host:x"] {
            assert!(super::address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert!(super::name("service", "echo.v2-a_b").is_ok());
        for bad in ["", "a/b", "a b", "é", &"x".repeat(129)] {
            assert!(super::name("service", bad).is_err(), "{bad}");
        }
    }
}
