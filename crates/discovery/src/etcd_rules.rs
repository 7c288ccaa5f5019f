//! Rules on etcd (see `rules.rs`): read, write, read back through revisions, follow.

use std::time::Duration;

use etcd_client::{Client, GetOptions, WatchOptions};
use tokio::sync::watch;

use crate::etcd::{bounded, connect, Etcd};
use crate::rules::{RuleVersion, MAX_RULE_BYTES};
use crate::DiscoveryError;

/// How long the follower waits before reconnecting after etcd failed it.
const RETRY: Duration = Duration::from_millis(250);

fn unavailable(etcd: &Etcd, reason: String) -> DiscoveryError {
    DiscoveryError::Unavailable {
        backend: etcd.url(),
        reason,
    }
}

/// The value of `key` at `revision` (0: now).
async fn read(
    client: &mut Client,
    key: &str,
    revision: i64,
) -> Result<Option<RuleVersion>, String> {
    let options = GetOptions::new().with_revision(revision);
    let resp = bounded(client.get(key, Some(options))).await?;
    let Some(kv) = resp.kvs().first() else {
        return Ok(None);
    };
    if kv.value().len() > MAX_RULE_BYTES {
        return Err(format!(
            "{key}: a rule of {} bytes, over {MAX_RULE_BYTES}",
            kv.value().len()
        ));
    }
    let text =
        std::str::from_utf8(kv.value()).map_err(|_| format!("{key}: the rule is not UTF-8"))?;
    Ok(Some(RuleVersion {
        revision: kv.mod_revision(),
        text: text.to_string(),
    }))
}

pub async fn get(
    etcd: &Etcd,
    key: &str,
    revision: i64,
) -> Result<Option<RuleVersion>, DiscoveryError> {
    let mut client = connect(&etcd.hosts, &etcd.config)
        .await
        .map_err(|e| unavailable(etcd, e))?;
    read(&mut client, key, revision)
        .await
        .map_err(|e| unavailable(etcd, e))
}

pub async fn put(etcd: &Etcd, key: &str, text: &str) -> Result<i64, DiscoveryError> {
    if text.len() > MAX_RULE_BYTES {
        return Err(unavailable(
            etcd,
            format!("a rule of {} bytes, over {MAX_RULE_BYTES}", text.len()),
        ));
    }
    let mut client = connect(&etcd.hosts, &etcd.config)
        .await
        .map_err(|e| unavailable(etcd, e))?;
    let resp = bounded(client.put(key, text, None))
        .await
        .map_err(|e| unavailable(etcd, e))?;
    Ok(resp.header().map_or(0, |h| h.revision()))
}

/// Walks back from the current version: the value just before a version's revision is
/// the previous version. Stops at the first version (`create_revision`), at a deletion,
/// at `most`, or where etcd compacted the history away.
pub async fn history(
    etcd: &Etcd,
    key: &str,
    most: usize,
) -> Result<Vec<RuleVersion>, DiscoveryError> {
    let mut client = connect(&etcd.hosts, &etcd.config)
        .await
        .map_err(|e| unavailable(etcd, e))?;
    let mut out = Vec::new();
    let mut at = 0;
    while out.len() < most {
        let version = match read(&mut client, key, at).await {
            Ok(Some(v)) => v,
            Ok(None) => break,
            // Older revisions compacted: the history ends here.
            Err(e) if !out.is_empty() && e.contains("compacted") => break,
            Err(e) => return Err(unavailable(etcd, e)),
        };
        at = version.revision - 1;
        out.push(version);
        if at <= 0 {
            break;
        }
    }
    Ok(out)
}

/// Lists the key, then watches it; publishes every version (a deletion as `None`). After
/// an error it reconnects and lists again, so a missed event is repaired.
pub fn follow(etcd: &Etcd, key: String) -> watch::Receiver<Option<RuleVersion>> {
    let (tx, rx) = watch::channel(None);
    let hosts = etcd.hosts.clone();
    let config = etcd.config.clone();
    tokio::spawn(async move {
        loop {
            let result: Result<(), String> = async {
                let mut client = connect(&hosts, &config).await?;
                let now = read(&mut client, &key, 0).await?;
                let start = now.as_ref().map_or(0, |v| v.revision);
                tx.send_if_modified(|held| replace(held, now));
                let options = WatchOptions::new().with_start_revision(start + 1);
                let mut stream = bounded(client.watch(key.as_str(), Some(options))).await?;
                loop {
                    let resp = tokio::select! {
                        _ = tx.closed() => return Ok(()),
                        m = stream.message() => m.map_err(|e| e.to_string())?,
                    };
                    let Some(resp) = resp else {
                        return Err("watch stream ended".into());
                    };
                    if resp.canceled() {
                        return Err(format!("watch cancelled: {}", resp.cancel_reason()));
                    }
                    if !resp.events().is_empty() {
                        // The latest state, read whole (and size-checked) rather than
                        // taken from the event.
                        let now = read(&mut client, &key, 0).await?;
                        tx.send_if_modified(|held| replace(held, now));
                    }
                }
            }
            .await;
            if tx.is_closed() {
                return;
            }
            if let Err(e) = result {
                tracing::debug!(%key, "following the rule: {e}; retrying");
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(RETRY) => {}
            }
        }
    });
    rx
}

/// Replaces `held` with `now`; true if it changed.
fn replace(held: &mut Option<RuleVersion>, now: Option<RuleVersion>) -> bool {
    let changed = *held != now;
    *held = now;
    changed
}
