//! Discovery on etcd (cargo feature `etcd`).
//!
//! Keys: `/axle/<namespace>/providers/<service>/<group>/<address>`, the value an
//! [`Provider`] as JSON, attached to a lease; consumers beside them under
//! `/axle/<namespace>/consumers/...` (`etcd_consumers.rs`); both kept registered by
//! `etcd_lease.rs`.
//!
//! - **Providers** grant a lease (`lease-ttl-s`), put their key under it and keep it
//!   alive every third of the TTL. While etcd is unreachable they keep trying; if the lease
//!   expired meanwhile they grant a new one and put the key again. Deregistering deletes
//!   the key and revokes the lease; a provider killed without it disappears when the
//!   lease runs out.
//! - **Consumers** list the prefix (the revision of that list is the truth up to it), then
//!   watch from the next revision. Every `resync-ms` they list again: a listing at a
//!   revision at or above what they hold replaces the set ("push and pull, pull is the
//!   truth"); an event at or below the revision already applied is stale and discarded.
//!   While etcd is unreachable the last set stays published (`connected = false`) and the
//!   loop reconnects with backoff; once etcd answers, a full listing resyncs.
//! - **Trust.** etcd is reached over TLS when `[discovery.etcd] ca-file` is set (with a
//!   client certificate when `cert-file`/`key-file` are), and as a user when `user` is
//!   (the password read from a file or a variable at each connection, so reconnecting
//!   picks up rotated files). Every entry a consumer lists or is sent is checked
//!   ([`crate::admit`]) before it joins the set; a bad one is skipped, counted
//!   ([`Listing::skipped`]) and reported at a bounded rate, never dialled.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, ConnectOptions, EventType, GetOptions, Identity, TlsOptions, WatchOptions,
};
use futures::future::BoxFuture;
use tokio::sync::watch;

use super::admit::{EntryLimits, Skips};
use super::config::{EtcdConfig, PasswordSource};
use super::etcd_lease::register_leased;
use super::revisions::Tracked;
use super::{
    Backend, BackendOptions, ConsumerListing, DiscoveryError, Listing, Provider, Registration,
    ServiceKey,
};

/// Longest one unary etcd request may take before it counts as "unreachable".
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// First and longest wait between reconnect attempts.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// An etcd cluster.
pub struct Etcd {
    pub(crate) hosts: Vec<String>,
    pub(crate) lease_ttl: Duration,
    resync: Duration,
    pub(crate) config: Arc<EtcdConfig>,
}

impl Etcd {
    /// The cluster at `hosts`. The credential and certificate files are read once here, so
    /// a missing or unreadable one is refused at start rather than retried for ever.
    pub fn new(hosts: Vec<String>, options: BackendOptions) -> Result<Etcd, DiscoveryError> {
        let etcd = Etcd {
            hosts,
            lease_ttl: options.lease_ttl.max(Duration::from_secs(1)),
            resync: options.resync,
            config: Arc::new(options.etcd),
        };
        let bad = |reason: String| DiscoveryError::BadUrl {
            url: etcd.url(),
            reason,
        };
        let c = &etcd.config;
        c.read_password().map_err(bad)?;
        for (what, file) in [
            ("ca-file", &c.ca_file),
            ("cert-file", &c.cert_file),
            ("key-file", &c.key_file),
        ] {
            if let Some(f) = file {
                read_pem(f, what).map_err(bad)?;
            }
        }
        if c.user.is_some() && !c.tls() {
            tracing::warn!(
                registry = etcd.url(),
                "the etcd password goes over plain HTTP: set [discovery.etcd] ca-file to use TLS"
            );
        }
        #[cfg(unix)]
        if let Some(PasswordSource::File(f)) = &c.password {
            use std::os::unix::fs::PermissionsExt;
            if std::fs::metadata(f).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
                tracing::warn!(file = %f.display(), "the etcd password file is readable by other users (chmod 600)");
            }
        }
        Ok(etcd)
    }

    pub(crate) fn url(&self) -> String {
        let tls = if self.config.tls() { " (TLS)" } else { "" };
        format!("etcd://{}{tls}", self.hosts.join(","))
    }
}

/// A PEM file's bytes.
fn read_pem(file: &Path, what: &str) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{what} {}: {e}", file.display()))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(format!("{what} {}: not a PEM file", file.display()));
    }
    Ok(bytes)
}

/// The prefix of a discovery key's providers.
pub fn prefix(key: &ServiceKey) -> String {
    format!(
        "/axle/{}/providers/{}/{}/",
        key.namespace, key.service, key.group
    )
}

/// A client of `hosts`. Without credentials it connects lazily: the channel dials on first
/// use and re-dials after etcd restarts. With a user it authenticates now (and again
/// whenever etcd says the token expired). TLS and credentials are read from their files
/// here, so a new client picks up rotated ones. HTTP/2 keep-alives notice a dead etcd
/// under a quiet watch within a couple of seconds.
pub(crate) async fn connect(hosts: &[String], config: &EtcdConfig) -> Result<Client, String> {
    let scheme = if config.tls() { "https" } else { "http" };
    let urls: Vec<String> = hosts.iter().map(|h| format!("{scheme}://{h}")).collect();
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(1))
        .with_keep_alive_while_idle(true);
    if let (Some(user), Some(password)) = (&config.user, config.read_password()?) {
        options = options
            .with_user(user.clone(), password)
            .with_auto_token_refresh(true);
    }
    if let Some(ca) = &config.ca_file {
        let mut tls =
            TlsOptions::new().ca_certificate(Certificate::from_pem(read_pem(ca, "ca-file")?));
        if let (Some(cert), Some(key)) = (&config.cert_file, &config.key_file) {
            tls = tls.identity(Identity::from_pem(
                read_pem(cert, "cert-file")?,
                read_pem(key, "key-file")?,
            ));
        }
        if let Some(name) = &config.server_name {
            tls = tls.domain_name(name.clone());
        }
        options = options.with_tls(tls);
    }
    bounded(Client::connect(urls, Some(options))).await
}

/// A unary request with [`REQUEST_TIMEOUT`].
pub(crate) async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

pub(crate) fn next_backoff(d: Duration) -> Duration {
    (d * 2).min(BACKOFF_MAX)
}

impl Backend for Etcd {
    fn describe(&self) -> String {
        self.url()
    }

    fn register(
        &self,
        key: &ServiceKey,
        instance: &Provider,
    ) -> BoxFuture<'static, Result<Registration, DiscoveryError>> {
        let hosts = self.hosts.clone();
        let config = self.config.clone();
        let url = self.url();
        let ttl = self.lease_ttl;
        let etcd_key = format!("{}{}", prefix(key), instance.address);
        let value = instance.encode();
        Box::pin(async move {
            let unavailable = |reason: String| DiscoveryError::Unavailable {
                backend: url.clone(),
                reason,
            };
            // The first registration must work: a provider that was asked to register and
            // cannot should say so at start, not serve invisibly.
            register_leased(hosts, config, ttl, etcd_key, value)
                .await
                .map_err(unavailable)
        })
    }

    fn subscribe(&self, key: &ServiceKey) -> watch::Receiver<Listing> {
        let (tx, rx) = watch::channel(Listing::default());
        tokio::spawn(follow(
            self.hosts.clone(),
            self.config.clone(),
            prefix(key),
            self.resync,
            tx,
        ));
        rx
    }

    fn register_consumer(
        &self,
        key: &ServiceKey,
        application: &str,
    ) -> BoxFuture<'static, Result<Option<Registration>, DiscoveryError>> {
        crate::etcd_consumers::register(self, key, application)
    }

    fn consumers(
        &self,
        key: &ServiceKey,
    ) -> BoxFuture<'static, Result<ConsumerListing, DiscoveryError>> {
        crate::etcd_consumers::list(self, key)
    }
}

/// The consumer's loop for one prefix: list, watch, re-list; publish into `tx`. After an
/// error the client is dropped and a new one connects (rotated credentials are read).
async fn follow(
    hosts: Vec<String>,
    config: Arc<EtcdConfig>,
    prefix: String,
    resync: Duration,
    tx: watch::Sender<Listing>,
) {
    let limits = &config.limits;
    let mut client = None;
    let mut t = Tracked::default();
    let mut skips = Skips::new(&prefix);
    let mut backoff = BACKOFF_MIN;
    let publish = |tx: &watch::Sender<Listing>, t: &Tracked, skips: &Skips, listed: bool| {
        tx.send_modify(|s| {
            s.revision = t.applied;
            s.instances = Arc::new(t.set.values().cloned().collect());
            s.connected = true;
            s.error = None;
            s.skipped = skips.total;
            s.last_skipped.clone_from(&skips.last);
            if listed {
                s.lists += 1;
            }
        });
    };
    let unreachable = |tx: &watch::Sender<Listing>, e: &str| {
        tx.send_if_modified(|s| {
            let changed = s.connected || s.error.as_deref() != Some(e);
            s.connected = false;
            s.error = Some(e.to_string());
            changed
        });
    };
    loop {
        if tx.is_closed() {
            return;
        }
        let c = match &mut client {
            Some(c) => c,
            None => match connect(&hosts, &config).await {
                Ok(c) => client.insert(c),
                Err(e) => {
                    unreachable(&tx, &e);
                    if wait(&tx, &mut backoff).await {
                        return;
                    }
                    continue;
                }
            },
        };
        // Pull.
        match list(c, &prefix, limits, &mut skips).await {
            Ok((rev, listed)) => {
                if t.listing(rev, listed) {
                    publish(&tx, &t, &skips, true);
                } else {
                    tracing::debug!(%prefix, rev, t.applied, "discarding a listing older than the set held");
                }
            }
            Err(e) => {
                unreachable(&tx, &e);
                client = None;
                if wait(&tx, &mut backoff).await {
                    return;
                }
                continue;
            }
        }
        backoff = BACKOFF_MIN;
        // Push, from the revision after the listing.
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(t.applied + 1);
        let mut stream = match bounded(c.watch(prefix.as_str(), Some(options))).await {
            Ok(s) => s,
            Err(e) => {
                unreachable(&tx, &e);
                client = None;
                if wait(&tx, &mut backoff).await {
                    return;
                }
                continue;
            }
        };
        let mut next_list = tokio::time::Instant::now() + resync;
        let failed = loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(next_list) => {
                    next_list = tokio::time::Instant::now() + resync;
                    match list(c, &prefix, limits, &mut skips).await {
                        Ok((rev, listed)) => {
                            if listed != t.set && rev >= t.applied {
                                tracing::info!(%prefix, rev, "re-list corrected the set");
                            }
                            if t.listing(rev, listed) {
                                publish(&tx, &t, &skips, true);
                            }
                        }
                        Err(e) => {
                            unreachable(&tx, &e);
                            break true;
                        }
                    }
                }
                m = stream.message() => match m {
                    Ok(Some(resp)) => {
                        if resp.canceled() {
                            // Compacted past our revision, or etcd dropped the watch:
                            // start over from a listing.
                            tracing::info!(%prefix, reason = resp.cancel_reason(), "watch cancelled; re-listing");
                            break false;
                        }
                        let skipped = skips.total;
                        let mut changed = false;
                        for ev in resp.events() {
                            let Some(kv) = ev.kv() else { continue };
                            let rev = kv.mod_revision();
                            let instance = match ev.event_type() {
                                EventType::Put => match admit(&prefix, kv.key(), kv.value(), limits, &t.set) {
                                    Ok((_, i)) => Some(i),
                                    Err((k, why)) => {
                                        // A bad value replaces a good one: the address is dropped.
                                        skips.skip(&k, rev, &why);
                                        None
                                    }
                                },
                                EventType::Delete => None,
                            };
                            let Some(name) = name_of(&prefix, kv.key()) else { continue };
                            changed |= t.event(rev, name.to_string(), instance);
                        }
                        // Only events' own revisions count: a response header's revision
                        // may run ahead of catch-up events still to come.
                        if changed || skips.total != skipped {
                            publish(&tx, &t, &skips, false);
                        }
                    }
                    Ok(None) => {
                        unreachable(&tx, "watch stream ended");
                        break true;
                    }
                    Err(e) => {
                        unreachable(&tx, &e.to_string());
                        break true;
                    }
                },
            }
        };
        if failed {
            client = None;
        }
        if wait(&tx, &mut backoff).await {
            return;
        }
    }
}

/// Sleeps `backoff` (doubling it); true if every receiver is gone.
async fn wait(tx: &watch::Sender<Listing>, backoff: &mut Duration) -> bool {
    let closed = tokio::select! {
        _ = tx.closed() => true,
        _ = tokio::time::sleep(*backoff) => false,
    };
    *backoff = next_backoff(*backoff);
    closed
}

/// The part of `key` after `prefix` (the address a provider registered under), if `key`
/// is UTF-8 and under `prefix`.
fn name_of<'k>(prefix: &str, key: &'k [u8]) -> Option<&'k str> {
    std::str::from_utf8(key).ok()?.strip_prefix(prefix)
}

/// One entry checked for a set that holds `set` already: the provider, or the key (for
/// messages) and why it is skipped.
fn admit(
    prefix: &str,
    key: &[u8],
    value: &[u8],
    limits: &EntryLimits,
    set: &BTreeMap<String, Provider>,
) -> Result<(String, Provider), (String, String)> {
    let Some(name) = name_of(prefix, key) else {
        let k = String::from_utf8_lossy(key).into_owned();
        return Err((k, "the key is not UTF-8".into()));
    };
    let key = format!("{prefix}{name}");
    if !set.contains_key(name) && set.len() >= limits.max_instances {
        let why = format!("over max-instances ({}) for this key", limits.max_instances);
        return Err((key, why));
    }
    match limits.admit(name, value) {
        Ok(p) => Ok((name.to_string(), p)),
        Err(why) => Err((key, why)),
    }
}

/// Every valid instance under `prefix` (at most `max-instances`, the first in key order),
/// and the revision of the listing. Bad entries are skipped and reported through `skips`
/// (one bad writer must not hide every provider). At most four times `max-instances`
/// keys are read, so a registry flooded with keys cannot exhaust a consumer's memory.
async fn list(
    client: &mut Client,
    prefix: &str,
    limits: &EntryLimits,
    skips: &mut Skips,
) -> Result<(i64, BTreeMap<String, Provider>), String> {
    let most = i64::try_from(limits.max_instances.saturating_mul(4)).unwrap_or(i64::MAX);
    let options = GetOptions::new().with_prefix().with_limit(most);
    let resp = bounded(client.get(prefix, Some(options))).await?;
    let rev = resp.header().map_or(0, |h| h.revision());
    skips.listing_cut(resp.more().then(|| (resp.kvs().len(), resp.count())));
    let mut set = BTreeMap::new();
    let mut bad = Vec::new();
    for kv in resp.kvs() {
        match admit(prefix, kv.key(), kv.value(), limits, &set) {
            Ok((name, i)) => {
                set.insert(name, i);
            }
            Err((k, why)) => {
                skips.skip(&k, kv.mod_revision(), &why);
                bad.push((k, kv.mod_revision()));
            }
        }
    }
    skips.keep_only(&bad);
    Ok((rev, set))
}
