//! Consumers on etcd: `/axle/<namespace>/consumers/<service>/<group>/<id>`, the value a
//! [`Consumer`] as JSON, under a lease kept alive like a provider's registration (the
//! same keep-alive loop, so a consumer that loses etcd registers again when it returns).

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs, UdpSocket};

use etcd_client::GetOptions;
use futures::future::BoxFuture;

use crate::consumer::{Consumer, ConsumerListing};
use crate::etcd::{bounded, connect, Etcd};
use crate::etcd_lease::register_leased;
use crate::{DiscoveryError, Registration, ServiceKey};

/// The most consumer entries one listing reads (a flooded prefix cannot exhaust memory).
const MAX_LISTED: i64 = 4096;

/// The prefix of a discovery key's consumers.
pub fn prefix(key: &ServiceKey) -> String {
    format!(
        "/axle/{}/consumers/{}/{}/",
        key.namespace, key.service, key.group
    )
}

/// The local IP address this host reaches `host:port` from: a UDP socket "connected" to
/// it (no packet is sent) tells which interface routing picks. Loopback if that fails.
fn local_ip_towards(host: &str) -> IpAddr {
    let local = || -> Option<IpAddr> {
        let target = host.to_socket_addrs().ok()?.next()?;
        let bind = if target.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        };
        let socket = UdpSocket::bind(bind).ok()?;
        socket.connect(target).ok()?;
        Some(socket.local_addr().ok()?.ip())
    };
    local().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// Registers this process as a consumer of `key` (see [`crate::Backend::register_consumer`]).
pub fn register(
    etcd: &Etcd,
    key: &ServiceKey,
    application: &str,
) -> BoxFuture<'static, Result<Option<Registration>, DiscoveryError>> {
    let hosts = etcd.hosts.clone();
    let config = etcd.config.clone();
    let url = etcd.url();
    let ttl = etcd.lease_ttl;
    let prefix = prefix(key);
    let application = application.to_string();
    Box::pin(async move {
        let unavailable = |reason: String| DiscoveryError::Unavailable {
            backend: url.clone(),
            reason,
        };
        let address = local_ip_towards(hosts.first().map_or("127.0.0.1:2379", String::as_str));
        let consumer = Consumer::this_process(&application, address);
        consumer
            .check()
            .map_err(|e| unavailable(format!("cannot register as a consumer: {e}")))?;
        let etcd_key = format!("{prefix}{}", consumer.id);
        let registration = register_leased(hosts, config, ttl, etcd_key, consumer.encode())
            .await
            .map_err(unavailable)?;
        Ok(Some(registration))
    })
}

/// The consumers of `key`, each entry checked ([`Consumer::admit`]); bad ones are listed
/// in [`ConsumerListing::skipped`], never shown as consumers.
pub fn list(
    etcd: &Etcd,
    key: &ServiceKey,
) -> BoxFuture<'static, Result<ConsumerListing, DiscoveryError>> {
    let hosts = etcd.hosts.clone();
    let config = etcd.config.clone();
    let url = etcd.url();
    let key = key.clone();
    Box::pin(async move {
        let unavailable = |reason: String| DiscoveryError::Unavailable {
            backend: url.clone(),
            reason,
        };
        let prefix = prefix(&key);
        let mut client = connect(&hosts, &config).await.map_err(unavailable)?;
        let options = GetOptions::new().with_prefix().with_limit(MAX_LISTED);
        let resp = bounded(client.get(prefix.as_str(), Some(options)))
            .await
            .map_err(unavailable)?;
        let mut listing = ConsumerListing::of(&key);
        let max_bytes = config.limits.max_value_bytes;
        for kv in resp.kvs() {
            let k = String::from_utf8_lossy(kv.key()).into_owned();
            let name = k.strip_prefix(&prefix).unwrap_or(&k);
            match Consumer::admit(name, kv.value(), max_bytes) {
                Ok(c) => listing.consumers.push(c),
                Err(why) => listing
                    .skipped
                    .push(format!("{}: {why}", crate::admit::shown(&k))),
            }
        }
        if resp.more() {
            listing.skipped.push(format!(
                "{prefix}: more than {MAX_LISTED} keys; the rest unread"
            ));
        }
        Ok(listing)
    })
}
