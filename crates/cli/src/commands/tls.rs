//! `--tls-*` and `--trust` flags: the manifest's `[tls]` and `[trust]` from the command
//! line (a flag replaces the manifest's value for its side; `docs/security.md`).

use std::path::PathBuf;

use axle::manifest::Manifest;
use axle::transport::tls::{ClientTlsFiles, ServerTlsFiles};

/// The provider's side.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServerTlsArgs {
    /// Serve TLS with this certificate chain (PEM; needs --tls-key). Reloaded when the
    /// file changes.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates chaining to this CA (mTLS; needs --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Treat peers in this address range as internal (repeatable; `10.0.0.0/8`,
    /// `127.0.0.1`), adding to the manifest's [trust] internal-networks.
    #[arg(long = "trust", value_name = "RANGE")]
    trust: Vec<String>,
    /// Treat peers presenting a client certificate with this DNS name as internal
    /// (repeatable), adding to [trust] identities.
    #[arg(long = "trust-identity", value_name = "NAME")]
    trust_identities: Vec<String>,
}

impl ServerTlsArgs {
    /// Lays the flags over `manifest`.
    pub fn apply(&self, manifest: &mut Manifest) -> anyhow::Result<()> {
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            manifest.tls.server = Some(ServerTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            });
        }
        for range in &self.trust {
            let net = axle::core::network::Network::parse(range)
                .map_err(|e| anyhow::anyhow!("--trust: {e}"))?;
            manifest.trust.internal_networks.push(net);
        }
        manifest
            .trust
            .identities
            .extend(self.trust_identities.iter().cloned());
        Ok(())
    }
}

/// The caller's side.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClientTlsArgs {
    /// Dial providers over TLS, trusting certificates from this CA (PEM).
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// The name to verify in providers' certificates (default: each endpoint's host).
    #[arg(long, requires = "tls_ca")]
    tls_server_name: Option<String>,
    /// Present this client certificate (PEM; mTLS; needs --tls-client-key).
    #[arg(long, requires_all = ["tls_ca", "tls_client_key"])]
    tls_client_cert: Option<PathBuf>,
    /// The private key of --tls-client-cert (PEM).
    #[arg(long, requires = "tls_client_cert")]
    tls_client_key: Option<PathBuf>,
}

impl ClientTlsArgs {
    /// Lays the flags over `manifest`.
    pub fn apply(&self, manifest: &mut Manifest) {
        if let Some(ca) = &self.tls_ca {
            manifest.tls.client = Some(ClientTlsFiles {
                ca: ca.clone(),
                server_name: self.tls_server_name.clone(),
                cert: self.tls_client_cert.clone(),
                key: self.tls_client_key.clone(),
            });
        }
    }
}
