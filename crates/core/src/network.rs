//! Address ranges, for who is trusted (`[trust] internal-networks`) and where a registry
//! may send callers (`allowed-networks`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address range: `10.0.0.0/8`, `fd00::/8`, or a single address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Parses `ADDRESS/PREFIX` or a bare address (a /32 or /128). Bits set past the
    /// prefix are refused (`10.1.2.3/8` is most likely a typo for something narrower).
    pub fn parse(s: &str) -> Result<Network, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{s}` is not an address range (10.0.0.0/8, fd00::/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{s}`: the prefix length must be 0..={max}"))?,
        };
        let n = Network { addr, prefix };
        let base = n.masked(addr);
        if base != addr {
            return Err(format!(
                "`{s}` has address bits set past /{prefix} (did you mean {base}/{prefix}?)"
            ));
        }
        Ok(n)
    }

    /// `ip` with the bits past this range's prefix cleared (`ip` of the same family).
    fn masked(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }

    /// Whether `ip` is in this range (an IPv4-mapped IPv6 address counts as its IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && self.masked(ip) == self.addr
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_parse_and_match() {
        let n = Network::parse("10.0.0.0/8").unwrap();
        assert!(n.contains("10.1.2.3".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert!(
            n.contains("::ffff:10.9.9.9".parse().unwrap()),
            "v4-mapped v6"
        );
        assert!(!n.contains("fd00::1".parse().unwrap()));
        let one = Network::parse("192.168.1.7").unwrap();
        assert_eq!(one.to_string(), "192.168.1.7/32");
        assert!(one.contains("192.168.1.7".parse().unwrap()));
        assert!(!one.contains("192.168.1.8".parse().unwrap()));
        let v6 = Network::parse("fd00::/8").unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        let all = Network::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!(!all.contains("::1".parse().unwrap()));
        assert!(Network::parse("::/0")
            .unwrap()
            .contains("::1".parse().unwrap()));
        for bad in [
            "",
            "10.0.0.0/33",
            "10/8",
            "10.0.0.0/x",
            "fd00::/129",
            "host/8",
        ] {
            assert!(Network::parse(bad).is_err(), "{bad}");
        }
        let typo = Network::parse("10.1.2.3/8").unwrap_err();
        assert!(typo.contains("10.0.0.0/8"), "{typo}");
    }
}
