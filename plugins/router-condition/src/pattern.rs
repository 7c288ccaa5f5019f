//! One side of a condition: the values a part may (or may not) take. A value is a
//! literal, a wildcard (`get*`, `*-eu`, `2.*`, `*`), an address range (`10.0.0.0/8`,
//! `fd00::/8`) or a numeric range (`1000..*`, `*..10`, `1..5`, ends included).

use std::net::IpAddr;

/// One accepted value.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Exactly this text.
    Exact(String),
    /// Text with `*` standing for any run of characters; the parts between the stars.
    Glob(Vec<String>),
    /// An IP in this network (a value that is not an IP, or `host:port` whose host is not
    /// in it, does not match).
    Cidr(IpAddr, u8),
    /// A number within `lo..=hi` (a value that is not a number does not match).
    Range(f64, f64),
}

impl Pattern {
    /// Parses one value of a comma list; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("empty value".into());
        }
        if let Some((lo, hi)) = text.split_once("..") {
            return range(lo, hi).ok_or_else(|| {
                format!("`{text}`: a range is `LOW..HIGH` of numbers, `*` for an open end")
            });
        }
        if let Some((ip, bits)) = text.split_once('/') {
            return cidr(ip, bits).ok_or_else(|| {
                format!("`{text}`: an address range is `IP/BITS` (`10.0.0.0/8`, `fd00::/8`)")
            });
        }
        if text.contains('*') {
            return Ok(Pattern::Glob(text.split('*').map(str::to_string).collect()));
        }
        Ok(Pattern::Exact(text.to_string()))
    }

    /// Whether `value` is one this pattern accepts.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            Pattern::Exact(t) => t == value,
            Pattern::Glob(parts) => glob(parts, value),
            Pattern::Cidr(net, bits) => host_ip(value).is_some_and(|ip| in_net(ip, *net, *bits)),
            Pattern::Range(lo, hi) => value
                .trim()
                .parse::<f64>()
                .is_ok_and(|n| *lo <= n && n <= *hi),
        }
    }
}

fn range(lo: &str, hi: &str) -> Option<Pattern> {
    let end = |s: &str, open: f64| match s.trim() {
        "*" => Some(open),
        n => n.parse::<f64>().ok().filter(|f| f.is_finite()),
    };
    let (lo, hi) = (end(lo, f64::NEG_INFINITY)?, end(hi, f64::INFINITY)?);
    (lo <= hi).then_some(Pattern::Range(lo, hi))
}

fn cidr(ip: &str, bits: &str) -> Option<Pattern> {
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some(Pattern::Cidr(ip, bits))
}

/// `value`'s IP: the value itself, or the host of `host:port` / `[v6]:port`.
fn host_ip(value: &str) -> Option<IpAddr> {
    if let Ok(ip) = value.parse() {
        return Some(ip);
    }
    value.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (ip, net, len) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        // An IPv4 caller seen through an IPv6 socket (`::ffff:10.0.0.1`).
        (IpAddr::V6(a), IpAddr::V4(n)) => match a.to_ipv4_mapped() {
            Some(a) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
            None => return false,
        },
        (IpAddr::V4(_), IpAddr::V6(_)) => return false,
    };
    let bits = u32::from(bits);
    if bits == 0 {
        return true;
    }
    let shift = len - bits;
    (ip >> shift) == (net >> shift)
}

/// Whether `value` is `parts` joined by any runs of characters.
fn glob(parts: &[String], value: &str) -> bool {
    let (first, rest) = match parts.split_first() {
        Some(x) => x,
        None => return value.is_empty(),
    };
    let Some(mut tail) = value.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return tail.is_empty();
    };
    for part in middle {
        match tail.find(part.as_str()) {
            Some(i) => tail = &tail[i + part.len()..],
            None => return false,
        }
    }
    tail.len() >= last.len() && tail.ends_with(last.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, v: &str) -> bool {
        Pattern::parse(p).unwrap().matches(v)
    }

    #[test]
    fn wildcards() {
        assert!(m("get*", "getUser") && m("get*", "get") && !m("get*", "put"));
        assert!(m("*-eu", "zone-eu") && !m("*-eu", "zone-us"));
        assert!(m("2.*", "2.1.0") && !m("2.*", "3.0") && !m("2.*", "12.0"));
        assert!(m("a*b*c", "a-b-c") && m("a*b*c", "abc") && !m("a*b*c", "acb"));
        assert!(m("*", "") && m("*", "anything"));
        assert!(!m("ab*ba", "aba"), "prefix and suffix may not overlap");
    }

    #[test]
    fn address_ranges() {
        assert!(m("10.0.0.0/8", "10.1.2.3") && !m("10.0.0.0/8", "11.0.0.1"));
        assert!(m("10.0.0.0/8", "10.1.2.3:7300"), "an endpoint's host:port");
        assert!(m("0.0.0.0/0", "1.2.3.4"));
        assert!(m("192.168.1.7/32", "192.168.1.7") && !m("192.168.1.7/32", "192.168.1.8"));
        assert!(m("fd00::/8", "fd12::1") && !m("fd00::/8", "fe80::1"));
        assert!(m("10.0.0.0/8", "::ffff:10.0.0.1"));
        assert!(!m("10.0.0.0/8", "not-an-ip"));
    }

    #[test]
    fn numeric_ranges() {
        assert!(m("1000..*", "1000") && m("1000..*", "1e6") && !m("1000..*", "999.9"));
        assert!(m("*..10", "-5") && !m("*..10", "10.5"));
        assert!(m("1..5", "3") && m("1..5", "5") && !m("1..5", "six"));
    }

    #[test]
    fn bad_values_say_why() {
        for (text, expected) in [
            ("", "empty"),
            ("5..1", "range"),
            ("a..b", "range"),
            ("10.0.0.0/33", "address range"),
            ("ten/8", "address range"),
        ] {
            let e = Pattern::parse(text).unwrap_err();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
