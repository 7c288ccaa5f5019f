//! Keeping an entry registered on etcd (providers and consumers alike): put under a lease,
//! the lease kept alive every third of its TTL, the entry put again under a new lease if
//! it expired during an outage, deleted and the lease revoked when the registration is
//! dropped.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, PutOptions};

use super::config::EtcdConfig;
use super::etcd::{bounded, connect, next_backoff, BACKOFF_MIN, REQUEST_TIMEOUT};
use super::Registration;

/// Puts `key` = `value` under a lease of `ttl` and keeps it there (a task renews the lease
/// and puts the entry again after an outage) until the registration is dropped.
pub(crate) async fn register_leased(
    hosts: Vec<String>,
    config: Arc<EtcdConfig>,
    ttl: Duration,
    key: String,
    value: Vec<u8>,
) -> Result<Registration, String> {
    let mut client = connect(&hosts, &config).await?;
    let lease = grant_and_put(&mut client, ttl, &key, &value)
        .await
        .map_err(|e| format!("cannot register {key}: {e}"))?;
    tracing::info!(key = %key, lease, "registered");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(keep_registered(
        client,
        (hosts, config),
        ttl,
        key.clone(),
        value,
        lease,
        stop_rx,
    ));
    Ok(Registration::with_task(key, stop_tx, task))
}

/// Grants a lease and puts the key under it; the lease id.
pub(crate) async fn grant_and_put(
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

/// Keeps the lease alive until `stop`, then deletes the key and revokes the lease. After
/// a failure it connects anew (`cluster`), so rotated credentials and certificates are
/// used.
pub(crate) async fn keep_registered(
    mut client: Client,
    cluster: (Vec<String>, Arc<EtcdConfig>),
    ttl: Duration,
    key: String,
    value: Vec<u8>,
    mut lease: i64,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let every = ttl / 3;
    let mut backoff = BACKOFF_MIN;
    'session: loop {
        if backoff > BACKOFF_MIN {
            tokio::select! {
                _ = &mut stop => break 'session,
                c = connect(&cluster.0, &cluster.1) => match c {
                    Ok(c) => client = c,
                    Err(e) => tracing::debug!(%key, "cannot reconnect yet: {e}"),
                },
            }
        }
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
