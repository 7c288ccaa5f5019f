//! A throwaway certificate authority: what `axle bench rpc`'s TLS row and the TLS tests
//! serve with. Never for production: its key lives in a temporary folder.

use std::path::PathBuf;

use axle::manifest::TlsSpec;
use axle::transport::tls::{ClientTlsFiles, ServerTlsFiles};

/// A throwaway certificate authority in a temporary folder, issuing certificates for
/// TLS benchmarks, tests and demos: `ca.pem` beside every issued `NAME.pem` and `NAME.key`.
pub struct Pki {
    pub dir: tempfile::TempDir,
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    pub fn new() -> Pki {
        Pki::try_new().expect("a throwaway CA")
    }

    /// [`Pki::new`], with its error.
    pub fn try_new() -> anyhow::Result<Pki> {
        let dir = tempfile::tempdir()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "axle throwaway CA");
        let key = rcgen::KeyPair::generate()?;
        let issuer = rcgen::CertifiedIssuer::self_signed(params, key)?;
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, issuer.pem())?;
        Ok(Pki { dir, ca, issuer })
    }

    /// `[tls]` for both sides on one host: the provider serves a certificate for
    /// `localhost`, the caller trusts this CA and verifies that name.
    pub fn localhost(&self) -> TlsSpec {
        let (cert, key) = self.issue("localhost", "localhost");
        TlsSpec {
            server: Some(ServerTlsFiles {
                cert,
                key,
                client_ca: None,
            }),
            client: Some(ClientTlsFiles {
                ca: self.ca.clone(),
                server_name: Some("localhost".into()),
                cert: None,
                key: None,
            }),
        }
    }

    /// Issues a certificate for `dns_name`, written to `FILE.pem` and `FILE.key`
    /// (replacing any earlier pair of that name, as a rotation would); returns their paths.
    pub fn issue(&self, file: &str, dns_name: &str) -> (PathBuf, PathBuf) {
        let params = rcgen::CertificateParams::new(vec![dns_name.to_string()]).expect("params");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        let cert_path = self.dir.path().join(format!("{file}.pem"));
        let key_path = self.dir.path().join(format!("{file}.key"));
        // Written beside and renamed, so a reader never sees half a file.
        for (path, text) in [(&key_path, key.serialize_pem()), (&cert_path, cert.pem())] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).expect("write");
            std::fs::rename(&tmp, path).expect("rename");
        }
        (cert_path, key_path)
    }
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}
