//! What a consumer accepts from a registry others write to (etcd).
//!
//! Whoever can write under `/axle/` decides where a consumer sends requests, so each
//! entry is checked before it can become an endpoint: its size, its address (syntax, a
//! port in 1..=65535, no unspecified or multicast address, the address the key names,
//! and, when `allowed-networks` is set, an IP inside one of those ranges), its tags
//! (count and lengths). A bad entry is skipped — never dialled — and reported once per
//! key revision, at most [`defaults::SKIP_WARNINGS_PER_MINUTE`] lines a minute per
//! discovery key ([`Skips`]); the rest of the listing keeps serving.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use crate::{defaults, Provider};

pub use axle_core::network::Network;

/// The host of a registered address.
#[derive(Debug, PartialEq, Eq)]
pub enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

/// Splits a registered `host:port` under stricter rules than the kernel's
/// ([`axle_core::validate::address`], checked first): the port is 1..=65535; the host is
/// an IPv4 address, a bracketed IPv6 address or a DNS name (labels of 1..=63 letters,
/// digits and `-`, at most 253 bytes); an unspecified (`0.0.0.0`, `[::]`), multicast or
/// broadcast address is refused.
pub fn parse_address(address: &str) -> Result<(Host<'_>, u16), String> {
    axle_core::validate::address(address)
        .map_err(|_| format!("`{}` is not host:port", shown(address)))?;
    let bad = |why: &str| format!("`{}`: {why}", shown(address));
    let (h, p) = address.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    let port: u16 = p.parse().map_err(|_| bad("the port is not a number"))?;
    if port == 0 {
        return Err(bad("port 0 cannot be dialled"));
    }
    let host = if let Some(inner) = h.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Host::Ip(IpAddr::V6(
            inner
                .parse()
                .map_err(|_| bad("not an IPv6 address in brackets"))?,
        ))
    } else if let Ok(v4) = h.parse::<Ipv4Addr>() {
        Host::Ip(IpAddr::V4(v4))
    } else {
        let label_ok = |l: &str| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if h.len() > 253 || !h.trim_end_matches('.').split('.').all(label_ok) {
            return Err(bad(
                "the host is neither an IP address ([v6] in brackets) nor a DNS name",
            ));
        }
        Host::Name(h)
    };
    if let Host::Ip(ip) = host {
        let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
        if ip.is_unspecified() || ip.is_multicast() || broadcast {
            return Err(bad("an unspecified, multicast or broadcast address"));
        }
    }
    Ok((host, port))
}

/// What one registry entry may be (`[discovery.etcd]`; defaults in [`defaults`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryLimits {
    /// The largest value parsed, in bytes.
    pub max_value_bytes: usize,
    /// The most tags (with `zone` and `version`).
    pub max_tags: usize,
    /// The longest tag key or value, zone or version, in bytes.
    pub max_tag_bytes: usize,
    /// The most providers kept per discovery key.
    pub max_instances: usize,
    /// When not empty, only IP addresses inside one of these ranges are dialled.
    pub allowed_networks: Vec<Network>,
}

impl Default for EntryLimits {
    fn default() -> Self {
        EntryLimits {
            max_value_bytes: defaults::MAX_VALUE_BYTES,
            max_tags: defaults::MAX_TAGS,
            max_tag_bytes: defaults::MAX_TAG_BYTES,
            max_instances: defaults::MAX_INSTANCES_PER_SERVICE,
            allowed_networks: Vec::new(),
        }
    }
}

impl EntryLimits {
    /// Parses and checks one entry: `name` is the last segment of its key (the address the
    /// provider registered under), `value` the stored bytes. The reason is short and
    /// quotes no more than a few dozen bytes of what the registry holds.
    pub fn admit(&self, name: &str, value: &[u8]) -> Result<Provider, String> {
        if value.len() > self.max_value_bytes {
            return Err(format!(
                "a value of {} bytes, over max-value-bytes ({})",
                value.len(),
                self.max_value_bytes
            ));
        }
        let p: Provider = serde_json::from_slice(value).map_err(|e| {
            let mut e = e.to_string();
            e.truncate(160);
            format!("not a provider's JSON: {e}")
        })?;
        if p.address != name {
            return Err(format!(
                "the key names `{}` but the value's address is `{}`",
                shown(name),
                shown(&p.address)
            ));
        }
        self.check(&p)?;
        Ok(p)
    }

    /// Checks a parsed provider: address, allowed networks, tags.
    pub fn check(&self, p: &Provider) -> Result<(), String> {
        let (host, _) = parse_address(&p.address)?;
        if !self.allowed_networks.is_empty() {
            match host {
                Host::Ip(ip) if self.allowed_networks.iter().any(|n| n.contains(ip)) => {}
                Host::Ip(_) => {
                    return Err(format!(
                        "`{}` is outside allowed-networks",
                        shown(&p.address)
                    ))
                }
                Host::Name(_) => {
                    return Err(format!(
                        "`{}`: with allowed-networks set, only IP addresses are accepted (a name could resolve anywhere)",
                        shown(&p.address)
                    ))
                }
            }
        }
        let extra = usize::from(p.zone.is_some()) + usize::from(p.version.is_some());
        if p.tags.len() + extra > self.max_tags {
            return Err(format!(
                "{} tags, over max-tags ({})",
                p.tags.len() + extra,
                self.max_tags
            ));
        }
        let long = |s: &str| s.len() > self.max_tag_bytes;
        let control = |s: &str| s.chars().any(char::is_control);
        let fields = p
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(p.zone.as_deref().map(|z| ("zone", z)))
            .chain(p.version.as_deref().map(|v| ("version", v)));
        for (k, v) in fields {
            if k.is_empty() || long(k) || long(v) {
                return Err(format!(
                    "tag `{}`: an empty key, or a key or value over max-tag-bytes ({})",
                    shown(k),
                    self.max_tag_bytes
                ));
            }
            if control(k) || control(v) {
                return Err(format!("tag `{}`: control characters", shown(k)));
            }
        }
        Ok(())
    }
}

/// At most 48 characters of `s`, escaped: registry strings go into log lines.
pub fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(48).flat_map(char::escape_debug).collect();
    if s.chars().nth(48).is_some() {
        out.push('…');
    }
    out
}

/// How many skipped entries are remembered (to report each key revision once); past it
/// the memory is cleared, so a flood is reported again at most at the rate limit.
const REMEMBERED: usize = 4096;
const WINDOW: Duration = Duration::from_secs(60);

/// The skipped entries of one discovery key: reported once per key revision, warnings
/// rate-limited.
#[derive(Debug)]
pub struct Skips {
    prefix: String,
    seen: HashMap<String, i64>,
    budget: u32,
    window_end: Instant,
    suppressed: u64,
    cut_reported: bool,
    /// Distinct entry revisions skipped so far.
    pub total: u64,
    /// The last one: `key: reason`.
    pub last: Option<String>,
}

impl Skips {
    pub fn new(prefix: &str) -> Skips {
        Skips {
            prefix: prefix.to_string(),
            seen: HashMap::new(),
            budget: defaults::SKIP_WARNINGS_PER_MINUTE,
            window_end: Instant::now() + WINDOW,
            suppressed: 0,
            cut_reported: false,
            total: 0,
            last: None,
        }
    }

    /// Records that `key` at `revision` was skipped for `reason`; true if this key
    /// revision had not been reported yet.
    pub fn skip(&mut self, key: &str, revision: i64, reason: &str) -> bool {
        if self.seen.get(key) == Some(&revision) {
            return false;
        }
        if self.seen.len() >= REMEMBERED {
            self.seen.clear();
        }
        self.seen.insert(key.to_string(), revision);
        self.total += 1;
        let key = shown(key);
        self.last = Some(format!("{key}: {reason}"));
        let now = Instant::now();
        if now >= self.window_end {
            if self.suppressed > 0 {
                tracing::warn!(
                    prefix = %self.prefix,
                    "{} more skipped registry entries were not logged",
                    self.suppressed
                );
            }
            self.budget = defaults::SKIP_WARNINGS_PER_MINUTE;
            self.window_end = now + WINDOW;
            self.suppressed = 0;
        }
        if self.budget > 0 {
            self.budget -= 1;
            tracing::warn!(%key, revision, "skipping a registry entry, never dialled: {reason}");
        } else {
            self.suppressed += 1;
            tracing::debug!(%key, revision, "skipping a registry entry: {reason}");
        }
        true
    }

    /// Whether the last listing stopped at `read` of `total` keys (`None`: it was
    /// whole). Warned once until a listing is whole again.
    pub fn listing_cut(&mut self, cut: Option<(usize, i64)>) {
        match cut {
            Some((read, total)) if !self.cut_reported => {
                self.cut_reported = true;
                tracing::warn!(
                    prefix = %self.prefix,
                    "{total} keys under this prefix; only the first {read} are read (4 x max-instances)"
                );
            }
            Some(_) => {}
            None => self.cut_reported = false,
        }
    }

    /// After a full listing: only the keys skipped in it stay remembered (a key that
    /// left and comes back is reported again).
    pub fn keep_only(&mut self, keys: &[(String, i64)]) {
        let keep: HashMap<&str, i64> = keys.iter().map(|(k, r)| (k.as_str(), *r)).collect();
        self.seen.retain(|k, r| keep.get(k.as_str()) == Some(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> EntryLimits {
        EntryLimits::default()
    }

    fn value(address: &str) -> Vec<u8> {
        Provider::new(address).encode()
    }

    #[test]
    fn addresses_are_held_to_strict_rules() {
        let ok = |a: &str| parse_address(a).map(|(_, p)| p);
        assert_eq!(ok("127.0.0.1:7300"), Ok(7300));
        assert_eq!(ok("[::1]:80"), Ok(80));
        assert_eq!(ok("provider-1.internal:65535"), Ok(65535));
        assert_eq!(ok("provider-1.internal.:1"), Ok(1));
        assert!(matches!(
            parse_address("a.b:1").unwrap().0,
            Host::Name("a.b")
        ));
        for bad in [
            "",
            "nohost",
            "h:0",
            "h:65536",
            "h:-1",
            ":80",
            "::1:80",
            "[::1:80",
            "[zz]:80",
            "0.0.0.0:80",
            "[::]:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
            "-bad.host:80",
            "bad-.host:80",
            "a..b:80",
            "under_score:80",
            "space host:80",
            "evil\nline:80",
            "http://h:80",
        ] {
            assert!(parse_address(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}:80", "a".repeat(64));
        assert!(parse_address(&long).is_err(), "a 64-byte label");
        let name = format!("{}:80", vec!["a".repeat(63); 4].join("."));
        assert!(parse_address(&name).is_err(), "over 253 bytes");
    }

    #[test]
    fn a_good_entry_is_admitted() {
        let mut p = Provider::new("10.0.0.5:7300");
        p.tags.insert("lane".into(), "canary".into());
        p.zone = Some("z1".into());
        let got = limits().admit("10.0.0.5:7300", &p.encode()).unwrap();
        assert_eq!(got, p);
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        let l = limits();
        let refused = |name: &str, v: &[u8]| l.admit(name, v).unwrap_err();
        assert!(refused("h:1", b"not json").contains("JSON"));
        assert!(refused("h:0", &value("h:0")).contains("port 0"));
        assert!(refused("h:1", &value("h:2")).contains("key names"));
        let huge = vec![b' '; defaults::MAX_VALUE_BYTES + 1];
        assert!(refused("h:1", &huge).contains("max-value-bytes"));
        let mut p = Provider::new("h:1");
        for i in 0..=defaults::MAX_TAGS {
            p.tags.insert(format!("t{i}"), "v".into());
        }
        assert!(refused("h:1", &p.encode()).contains("max-tags"));
        let mut p = Provider::new("h:1");
        p.tags
            .insert("k".into(), "v".repeat(defaults::MAX_TAG_BYTES + 1));
        assert!(refused("h:1", &p.encode()).contains("max-tag-bytes"));
        let mut p = Provider::new("h:1");
        p.version = Some("1\n2".into());
        assert!(refused("h:1", &p.encode()).contains("control"));
        let mut p = Provider::new("h:1");
        p.tags.insert(String::new(), "v".into());
        assert!(refused("h:1", &p.encode()).contains("empty key"));
        // zone and version count as tags.
        let mut p = Provider::new("h:1");
        for i in 0..defaults::MAX_TAGS - 1 {
            p.tags.insert(format!("t{i}"), "v".into());
        }
        p.zone = Some("z".into());
        assert!(l.admit("h:1", &p.encode()).is_ok());
        p.version = Some("1".into());
        assert!(refused("h:1", &p.encode()).contains("max-tags"));
    }

    #[test]
    fn allowed_networks_admit_only_ips_inside_them() {
        let l = EntryLimits {
            allowed_networks: vec![
                Network::parse("10.0.0.0/8").unwrap(),
                Network::parse("fd00::/8").unwrap(),
            ],
            ..limits()
        };
        assert!(l.admit("10.2.3.4:1", &value("10.2.3.4:1")).is_ok());
        assert!(l.admit("[fd00::7]:1", &value("[fd00::7]:1")).is_ok());
        let out = l.admit("169.254.169.254:80", &value("169.254.169.254:80"));
        assert!(out.unwrap_err().contains("outside allowed-networks"));
        let name = l.admit("db.internal:1", &value("db.internal:1"));
        assert!(name.unwrap_err().contains("only IP addresses"));
    }

    #[test]
    fn registry_strings_are_shortened_and_escaped_for_logs() {
        assert_eq!(shown("a\nb"), "a\\nb");
        let s = shown(&"x".repeat(1000));
        assert_eq!(s.chars().count(), 49);
        let reason = limits()
            .admit("h:1", &value(&format!("{}:1", "y".repeat(5000))))
            .unwrap_err();
        assert!(reason.len() < 200, "{reason}");
    }

    #[test]
    fn each_key_revision_is_reported_once() {
        let mut s = Skips::new("/p/");
        assert!(s.skip("/p/a", 5, "bad"));
        assert!(
            !s.skip("/p/a", 5, "bad"),
            "the same revision again (a re-list)"
        );
        assert!(s.skip("/p/a", 6, "bad"), "rewritten");
        assert!(s.skip("/p/b", 6, "bad"));
        assert_eq!(s.total, 3);
        assert_eq!(s.last.as_deref(), Some("/p/b: bad"));
        // A listing where only b is still bad: a coming back is reported again.
        s.keep_only(&[("/p/b".into(), 6)]);
        assert!(!s.skip("/p/b", 6, "bad"));
        assert!(s.skip("/p/a", 6, "bad"));
        // A flood: memory stays bounded, every new revision still counts.
        for i in 0..3 * REMEMBERED {
            s.skip(&format!("/p/k{i}"), 1, "bad");
        }
        assert!(s.seen.len() <= REMEMBERED);
        assert_eq!(s.total, 4 + 3 * REMEMBERED as u64);
        assert_eq!(s.budget, 0, "warnings past the budget are suppressed");
        assert!(s.suppressed > 0);
    }
}
