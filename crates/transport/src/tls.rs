//! TLS on the wire (rustls, `ring` provider): the provider's certificate and, for mTLS,
//! the CA its callers' certificates must chain to; the caller's trust roots, the name it
//! verifies, and its own certificate for mTLS.
//!
//! Certificate and key files are re-read when they change (checked at most once a second,
//! on a handshake that needs them), so a rotated certificate is served without a restart
//! and a broken new file keeps the old one in service (logged). Trust roots are read once.
//!
//! A peer's identity is the DNS names of its verified certificate's subject alternative
//! names (`Peer::names`): what a provider's trust allow-list matches.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SignatureScheme};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what} `{}`: {why}", path.display())]
pub struct TlsError {
    what: &'static str,
    path: PathBuf,
    why: String,
}

/// What a provider serves TLS with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// Its certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// When set, callers must present a certificate chaining to these CAs (mTLS).
    pub client_ca: Option<PathBuf>,
}

/// What a caller dials TLS with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// The CAs providers' certificates must chain to (PEM).
    pub ca: PathBuf,
    /// The name verified in providers' certificates (default: each endpoint's host).
    pub server_name: Option<String>,
    /// The caller's own certificate and key, for providers that require mTLS.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A provider's TLS acceptor.
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
}

impl ServerTls {
    pub fn load(files: &ServerTlsFiles) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| error("TLS versions", Path::new(""), e))?;
        let builder = match &files.client_ca {
            Some(ca) => {
                let roots = Arc::new(roots(ca)?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| error("client CA", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let cert = Arc::new(ReloadingCert::load(&files.cert, &files.key)?);
        let mut config = builder.with_cert_resolver(cert);
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// A caller's TLS connector.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) connector: tokio_rustls::TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl ClientTls {
    pub fn load(files: &ClientTlsFiles) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| error("TLS versions", Path::new(""), e))?
            .with_root_certificates(roots(&files.ca)?);
        let mut config = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => {
                builder.with_client_cert_resolver(Arc::new(ReloadingCert::load(cert, key)?))
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(path), None) | (None, Some(path)) => {
                return Err(error(
                    "client certificate",
                    path,
                    "a client certificate needs both its cert and key files",
                ))
            }
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        let server_name = match &files.server_name {
            Some(name) => Some(
                ServerName::try_from(name.clone())
                    .map_err(|e| error("server name", Path::new(name), e))?,
            ),
            None => None,
        };
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// The name to verify when dialling `addr` (`host:port`).
    pub(crate) fn name_for(&self, addr: &str) -> Result<ServerName<'static>, String> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        ServerName::try_from(host.to_string()).map_err(|e| format!("server name `{host}`: {e}"))
    }
}

/// The protocol name both sides offer (a TLS peer speaking something else is refused).
const ALPN: &[u8] = b"axle/1";

/// The DNS names of a verified peer certificate (its identity for trust checks).
pub(crate) fn names_of(cert: &CertificateDer<'_>) -> Vec<String> {
    match webpki::EndEntityCert::try_from(cert) {
        Ok(ee) => ee.valid_dns_names().map(str::to_string).collect(),
        Err(_) => Vec::new(),
    }
}

fn error(what: &'static str, path: &Path, why: impl std::fmt::Display) -> TlsError {
    TlsError {
        what,
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certs(path)? {
        roots
            .add(cert)
            .map_err(|e| error("CA certificate", path, e))?;
    }
    Ok(roots)
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| error("certificate file", path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error("certificate file", path, e))?;
    if certs.is_empty() {
        return Err(error("certificate file", path, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = certs(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| error("key file", key, e))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)
        .map_err(|e| error("key file", key, e))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        error(
            "key file",
            key,
            format!("does not match {}: {e}", cert.display()),
        )
    })?;
    Ok(certified)
}

/// A certificate and key read from files, re-read when either file changes.
#[derive(Debug)]
struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    current: ArcSwap<CertifiedKey>,
    /// Modification times the current pair was read at.
    stamps: Mutex<(Option<SystemTime>, Option<SystemTime>)>,
    /// `now_ns` of the last look at the files.
    checked_ns: AtomicU64,
}

/// How often the files are looked at, at most.
const RELOAD_CHECK_NS: u64 = 1_000_000_000;

impl ReloadingCert {
    fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let stamps = (modified(cert), modified(key));
        Ok(ReloadingCert {
            current: ArcSwap::from_pointee(certified_key(cert, key)?),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            stamps: Mutex::new(stamps),
            checked_ns: AtomicU64::new(axle_core::now_ns()),
        })
    }

    fn get(&self) -> Arc<CertifiedKey> {
        let now = axle_core::now_ns();
        let last = self.checked_ns.load(Relaxed);
        if now.saturating_sub(last) >= RELOAD_CHECK_NS
            && self
                .checked_ns
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.reload_if_changed();
        }
        self.current.load_full()
    }

    fn reload_if_changed(&self) {
        let now = (modified(&self.cert), modified(&self.key));
        let mut stamps = self.stamps.lock().unwrap_or_else(|e| e.into_inner());
        if *stamps == now {
            return;
        }
        match certified_key(&self.cert, &self.key) {
            Ok(fresh) => {
                self.current.store(Arc::new(fresh));
                *stamps = now;
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
            }
            // Half-written during a rotation, or broken: keep serving the old pair and
            // look again next time.
            Err(e) => tracing::warn!("TLS certificate not reloaded, the old one stays: {e}"),
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

impl ResolvesClientCert for ReloadingCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
