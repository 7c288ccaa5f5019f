//! `[tls]` and `[trust]`: TLS on the wire, and who a provider trusts
//! (`docs/security.md`).
//!
//! ```toml
//! [tls]
//! cert-file = "provider.pem"       # the provider serves TLS with this chain and key
//! key-file = "provider.key"
//! client-ca-file = "ca.pem"        # and requires client certificates from this CA (mTLS)
//! ca-file = "ca.pem"               # the caller dials TLS, trusting providers from this CA
//! server-name = "axle.internal"    # the name the caller verifies (default: the host)
//! client-cert-file = "caller.pem"  # the caller's own certificate, for mTLS
//! client-key-file = "caller.key"
//!
//! [trust]
//! internal-networks = ["10.0.0.0/8"]    # peers in these ranges are internal
//! identities = ["orders.internal"]      # mTLS identities that are internal
//! ```
//!
//! With no `[trust]`, nobody is trusted: every request is external, so `internal-only`
//! methods refuse every caller until the manifest says who is internal.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use axle_core::network::Network;
use axle_transport::serve::Peer;
use axle_transport::tls::{ClientTlsFiles, ServerTlsFiles};

use crate::KeyError;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawTls {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    server_name: Option<String>,
    client_cert_file: Option<PathBuf>,
    client_key_file: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawTrust {
    #[serde(default)]
    internal_networks: Vec<String>,
    #[serde(default)]
    identities: Vec<String>,
}

/// `[tls]`: what each side uses, if anything (plain TCP otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSpec {
    /// The provider serves TLS.
    pub server: Option<ServerTlsFiles>,
    /// The caller dials TLS.
    pub client: Option<ClientTlsFiles>,
}

/// `[trust]`: which peers are internal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustSpec {
    /// Peers whose address is in one of these ranges.
    pub internal_networks: Vec<Network>,
    /// Peers whose verified certificate names one of these (mTLS).
    pub identities: BTreeSet<String>,
}

impl TrustSpec {
    /// Whether `peer` is inside the trust boundary: its verified identity is on the
    /// allow-list, or its address is in an internal range.
    pub fn trusts(&self, peer: &Peer) -> bool {
        peer.names.iter().any(|n| self.identities.contains(n))
            || self
                .internal_networks
                .iter()
                .any(|net| net.contains(peer.addr.ip()))
    }
}

fn at(key: &str, reason: impl Into<String>) -> KeyError {
    (key.to_string(), reason.into())
}

/// Paths relative to the manifest's folder.
fn resolve(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_relative() {
        base.join(p)
    } else {
        p
    }
}

pub(crate) fn tls(raw: RawTls, base: &Path) -> Result<TlsSpec, KeyError> {
    let server = match (raw.cert_file, raw.key_file) {
        (Some(cert), Some(key)) => Some(ServerTlsFiles {
            cert: resolve(base, cert),
            key: resolve(base, key),
            client_ca: raw.client_ca_file.map(|p| resolve(base, p)),
        }),
        (None, None) if raw.client_ca_file.is_some() => {
            return Err(at(
                "tls.client-ca-file",
                "requires cert-file and key-file (the provider's own certificate)",
            ))
        }
        (None, None) => None,
        (Some(_), None) => return Err(at("tls.key-file", "required with cert-file")),
        (None, Some(_)) => return Err(at("tls.cert-file", "required with key-file")),
    };
    let client = match raw.ca_file {
        Some(ca) => {
            let (cert, key) = match (raw.client_cert_file, raw.client_key_file) {
                (Some(c), Some(k)) => (Some(resolve(base, c)), Some(resolve(base, k))),
                (None, None) => (None, None),
                (Some(_), None) => {
                    return Err(at("tls.client-key-file", "required with client-cert-file"))
                }
                (None, Some(_)) => {
                    return Err(at("tls.client-cert-file", "required with client-key-file"))
                }
            };
            Some(ClientTlsFiles {
                ca: resolve(base, ca),
                server_name: raw.server_name,
                cert,
                key,
            })
        }
        None if raw.client_cert_file.is_some() || raw.server_name.is_some() => {
            return Err(at(
                "tls.ca-file",
                "required for the caller's TLS (client-cert-file, server-name)",
            ))
        }
        None => None,
    };
    Ok(TlsSpec { server, client })
}

pub(crate) fn trust(raw: RawTrust) -> Result<TrustSpec, KeyError> {
    let mut internal_networks = Vec::new();
    for (i, text) in raw.internal_networks.iter().enumerate() {
        let net = Network::parse(text)
            .map_err(|why| at(&format!("trust.internal-networks[{i}]"), why))?;
        internal_networks.push(net);
    }
    let mut identities = BTreeSet::new();
    for (i, name) in raw.identities.into_iter().enumerate() {
        if name.is_empty() || name.len() > 253 {
            return Err(at(
                &format!("trust.identities[{i}]"),
                "a certificate DNS name of 1..=253 bytes",
            ));
        }
        identities.insert(name);
    }
    Ok(TrustSpec {
        internal_networks,
        identities,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn peer(addr: &str, names: &[&str]) -> Arc<Peer> {
        Arc::new(Peer {
            addr: addr.parse().unwrap(),
            names: names.iter().map(|n| n.to_string()).collect(),
        })
    }

    fn trust_of(networks: &[&str], identities: &[&str]) -> TrustSpec {
        trust(RawTrust {
            internal_networks: networks.iter().map(|s| s.to_string()).collect(),
            identities: identities.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn nobody_is_trusted_by_default() {
        let t = TrustSpec::default();
        assert!(!t.trusts(&peer("127.0.0.1:5000", &[])));
        assert!(!t.trusts(&peer("127.0.0.1:5000", &["orders.internal"])));
    }

    #[test]
    fn ranges_and_identities_are_trusted() {
        let t = trust_of(&["10.0.0.0/8", "127.0.0.1"], &["orders.internal"]);
        assert!(t.trusts(&peer("10.1.2.3:1", &[])));
        assert!(t.trusts(&peer("127.0.0.1:1", &[])));
        assert!(!t.trusts(&peer("127.0.0.2:1", &[])));
        assert!(t.trusts(&peer("192.168.1.1:1", &["x", "orders.internal"])));
        assert!(!t.trusts(&peer("192.168.1.1:1", &["orders.external"])));
        // An IPv4 peer seen through a dual-stack socket.
        assert!(t.trusts(&peer("[::ffff:10.0.0.1]:1", &[])));
    }

    #[test]
    fn a_bad_range_names_its_key() {
        let err = trust(RawTrust {
            internal_networks: vec!["10.0.0.0/8".into(), "ten".into()],
            identities: vec![],
        })
        .unwrap_err();
        assert_eq!(err.0, "trust.internal-networks[1]");
    }

    #[test]
    fn tls_keys_come_in_pairs() {
        let base = Path::new("/m");
        let raw = |f: fn(&mut RawTls)| {
            let mut r = RawTls::default();
            f(&mut r);
            tls(r, base)
        };
        assert_eq!(raw(|_| {}).unwrap(), TlsSpec::default());
        assert_eq!(
            raw(|r| r.cert_file = Some("c.pem".into())).unwrap_err().0,
            "tls.key-file"
        );
        assert_eq!(
            raw(|r| r.server_name = Some("x".into())).unwrap_err().0,
            "tls.ca-file"
        );
        let both = raw(|r| {
            r.cert_file = Some("c.pem".into());
            r.key_file = Some("/abs/k.pem".into());
            r.ca_file = Some("ca.pem".into());
        })
        .unwrap();
        let server = both.server.unwrap();
        assert_eq!(server.cert, Path::new("/m/c.pem"));
        assert_eq!(server.key, Path::new("/abs/k.pem"));
        assert_eq!(both.client.unwrap().ca, Path::new("/m/ca.pem"));
    }
}
