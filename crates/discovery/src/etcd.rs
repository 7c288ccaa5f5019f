//! Discovery on etcd (cargo feature `etcd`).
//!
//! Keys: `/axle/<namespace>/providers/<service>/<group>/<address>`, the value an
//! [`Provider`] as JSON, attached to a lease.
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, EventType, GetOptions, PutOptions, WatchOptions};
use futures::future::BoxFuture;
use tokio::sync::watch;

use super::revisions::Tracked;
use super::{Backend, BackendOptions, DiscoveryError, Listing, Provider, Registration, ServiceKey};

/// Longest one unary etcd request may take before it counts as "unreachable".
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// First and longest wait between reconnect attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// An etcd cluster.
pub struct Etcd {
    hosts: Vec<String>,
    lease_ttl: Duration,
    resync: Duration,
}

impl Etcd {
    pub fn new(hosts: Vec<String>, options: BackendOptions) -> Result<Etcd, DiscoveryError> {
        Ok(Etcd {
            hosts,
            lease_ttl: options.lease_ttl.max(Duration::from_secs(1)),
            resync: options.resync,
        })
    }

    fn url(&self) -> String {
        format!("etcd://{}", self.hosts.join(","))
    }
}

/// The prefix of a discovery key's providers.
pub fn prefix(key: &ServiceKey) -> String {
    format!(
        "/axle/{}/providers/{}/{}/",
        key.namespace, key.service, key.group
    )
}

/// Connects lazily: the channel dials on first use and re-dials after etcd restarts, so
/// one client serves a registration or a subscription for its whole life. HTTP/2
/// keep-alives notice a dead etcd under a quiet watch within a couple of seconds.
async fn connect(hosts: &[String]) -> Result<Client, etcd_client::Error> {
    let urls: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(1))
        .with_keep_alive_while_idle(true);
    Client::connect(urls, Some(options)).await
}

/// A unary request with [`REQUEST_TIMEOUT`].
async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

fn next_backoff(d: Duration) -> Duration {
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
        let url = self.url();
        let ttl = self.lease_ttl;
        let etcd_key = format!("{}{}", prefix(key), instance.address);
        let value = instance.encode();
        Box::pin(async move {
            let unavailable = |reason: String| DiscoveryError::Unavailable {
                backend: url.clone(),
                reason,
            };
            let mut client = connect(&hosts)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            // The first registration must work: a provider that was asked to register and
            // cannot should say so at start, not serve invisibly.
            let lease = grant_and_put(&mut client, ttl, &etcd_key, &value)
                .await
                .map_err(|e| unavailable(format!("cannot register {etcd_key}: {e}")))?;
            tracing::info!(key = %etcd_key, lease, "registered");
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(keep_registered(
                client,
                ttl,
                etcd_key.clone(),
                value,
                lease,
                stop_rx,
            ));
            Ok(Registration::with_task(etcd_key, stop_tx, task))
        })
    }

    fn subscribe(&self, key: &ServiceKey) -> watch::Receiver<Listing> {
        let (tx, rx) = watch::channel(Listing::default());
        tokio::spawn(follow(self.hosts.clone(), prefix(key), self.resync, tx));
        rx
    }
}

/// Grants a lease and puts the key under it; the lease id.
async fn grant_and_put(
    client: &mut Client,
    ttl: Duration,
    key: &str,
    value: &[u8],
) -> Result<i64, String> {
    let lease = bounded(client.lease_grant(ttl.as_secs() as i64, None))
        .await?
        .id();
    bounded(client.put(
        key,
        value.to_vec(),
        Some(PutOptions::new().with_lease(lease)),
    ))
    .await?;
    Ok(lease)
}

/// Keeps the lease alive until `stop`, then deletes the key and revokes the lease.
async fn keep_registered(
    mut client: Client,
    ttl: Duration,
    key: String,
    value: Vec<u8>,
    mut lease: i64,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let every = ttl / 3;
    let mut backoff = BACKOFF_MIN;
    'session: loop {
        // A keep-alive stream for the current lease (or a new lease if it expired).
        let stream = bounded(client.lease_keep_alive(lease)).await;
        let (mut keeper, mut responses) = match stream {
            Ok(s) => s,
            Err(e) => {
                if backoff == BACKOFF_MIN {
                    tracing::warn!(%key, "etcd unreachable, registration kept alive once it returns: {e}");
                } else {
                    tracing::debug!(%key, "etcd still unreachable: {e}");
                }
                tokio::select! {
                    _ = &mut stop => break 'session,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = next_backoff(backoff);
                continue;
            }
        };
        loop {
            if keeper.keep_alive().await.is_err() {
                tokio::select! {
                    _ = &mut stop => break 'session,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = next_backoff(backoff);
                continue 'session;
            }
            let answer = tokio::select! {
                _ = &mut stop => break 'session,
                a = tokio::time::timeout(REQUEST_TIMEOUT, responses.message()) => a,
            };
            match answer {
                Ok(Ok(Some(r))) if r.ttl() > 0 => backoff = BACKOFF_MIN,
                Ok(Ok(Some(_))) => {
                    // The lease expired while etcd was away (or was revoked): register anew.
                    tracing::warn!(%key, "lease expired; registering again");
                    match grant_and_put(&mut client, ttl, &key, &value).await {
                        Ok(l) => {
                            lease = l;
                            tracing::info!(%key, lease, "registered again");
                        }
                        Err(e) => {
                            tracing::warn!(%key, "cannot register again yet: {e}");
                            tokio::select! {
                                _ = &mut stop => break 'session,
                                _ = tokio::time::sleep(backoff) => {}
                            }
                            backoff = next_backoff(backoff);
                        }
                    }
                    continue 'session;
                }
                _ => {
                    tokio::select! {
                        _ = &mut stop => break 'session,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = next_backoff(backoff);
                    continue 'session;
                }
            }
            tokio::select! {
                _ = &mut stop => break 'session,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
    // Deregister: the key first (consumers see the delete at once), then the lease. If
    // etcd is away, the lease runs out on its own.
    if let Err(e) = bounded(client.delete(key.as_str(), None)).await {
        tracing::warn!(%key, "deregister: {e} (the lease will expire)");
    }
    let _ = bounded(client.lease_revoke(lease)).await;
    tracing::info!(%key, "deregistered");
}

/// The consumer's loop for one prefix: list, watch, re-list; publish into `tx`.
async fn follow(hosts: Vec<String>, prefix: String, resync: Duration, tx: watch::Sender<Listing>) {
    let mut client = None;
    let mut t = Tracked::default();
    let mut backoff = BACKOFF_MIN;
    let publish = |tx: &watch::Sender<Listing>, t: &Tracked, listed: bool| {
        tx.send_modify(|s| {
            s.revision = t.applied;
            s.instances = Arc::new(t.set.values().cloned().collect());
            s.connected = true;
            s.error = None;
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
            None => match connect(&hosts).await {
                Ok(c) => client.insert(c),
                Err(e) => {
                    unreachable(&tx, &e.to_string());
                    if wait(&tx, &mut backoff).await {
                        return;
                    }
                    continue;
                }
            },
        };
        // Pull.
        match list(c, &prefix).await {
            Ok((rev, listed)) => {
                if t.listing(rev, listed) {
                    publish(&tx, &t, true);
                } else {
                    tracing::debug!(%prefix, rev, t.applied, "discarding a listing older than the set held");
                }
            }
            Err(e) => {
                unreachable(&tx, &e);
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
                if wait(&tx, &mut backoff).await {
                    return;
                }
                continue;
            }
        };
        let mut next_list = tokio::time::Instant::now() + resync;
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(next_list) => {
                    next_list = tokio::time::Instant::now() + resync;
                    match list(c, &prefix).await {
                        Ok((rev, listed)) => {
                            if listed != t.set && rev >= t.applied {
                                tracing::info!(%prefix, rev, "re-list corrected the set");
                            }
                            if t.listing(rev, listed) {
                                publish(&tx, &t, true);
                            }
                        }
                        Err(e) => {
                            unreachable(&tx, &e);
                            break;
                        }
                    }
                }
                m = stream.message() => match m {
                    Ok(Some(resp)) => {
                        if resp.canceled() {
                            // Compacted past our revision, or etcd dropped the watch:
                            // start over from a listing.
                            tracing::info!(%prefix, reason = resp.cancel_reason(), "watch cancelled; re-listing");
                            break;
                        }
                        let mut changed = false;
                        for ev in resp.events() {
                            let Some(kv) = ev.kv() else { continue };
                            let Ok(k) = kv.key_str() else { continue };
                            let address = k.strip_prefix(prefix.as_str()).unwrap_or(k).to_string();
                            let instance = match ev.event_type() {
                                EventType::Put => match Provider::decode(kv.value()) {
                                    Ok(i) => Some(i),
                                    Err(e) => {
                                        // A bad value replaces a good one: drop the address.
                                        tracing::warn!(key = k, "ignoring a malformed registration: {e}");
                                        None
                                    }
                                },
                                EventType::Delete => None,
                            };
                            changed |= t.event(kv.mod_revision(), address, instance);
                        }
                        // Only events' own revisions count: a response header's revision
                        // may run ahead of catch-up events still to come.
                        if changed {
                            publish(&tx, &t, false);
                        }
                    }
                    Ok(None) => {
                        unreachable(&tx, "watch stream ended");
                        break;
                    }
                    Err(e) => {
                        unreachable(&tx, &e.to_string());
                        break;
                    }
                },
            }
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

/// Every instance under `prefix`, and the revision of the listing. Malformed values are
/// skipped with a warning (one bad writer must not hide every provider).
async fn list(
    client: &mut Client,
    prefix: &str,
) -> Result<(i64, BTreeMap<String, Provider>), String> {
    let resp = bounded(client.get(prefix, Some(GetOptions::new().with_prefix()))).await?;
    let rev = resp.header().map_or(0, |h| h.revision());
    let mut set = BTreeMap::new();
    for kv in resp.kvs() {
        let Ok(k) = kv.key_str() else { continue };
        let address = k.strip_prefix(prefix).unwrap_or(k).to_string();
        match Provider::decode(kv.value()) {
            Ok(i) => {
                set.insert(address, i);
            }
            Err(e) => tracing::warn!(key = k, "ignoring a malformed registration: {e}"),
        }
    }
    Ok((rev, set))
}
