//! Who calls the services this kernel provides: the consumers registered beside it in the
//! registry (etcd; `axle_discovery::consumer`), listed when `stats` is asked, so `axle
//! stats --admin` and `GET /stats` answer "who calls this service" from the provider.

use std::sync::Arc;
use std::time::Duration;

use axle_discovery::{Backend, ConsumerListing, ServiceKey};
use serde::{Deserialize, Serialize};

/// How long one service's listing may take before `stats` answers without it: the
/// registry being slow must not make the kernel's own counters unreadable.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// The registry a serving kernel registers in, and the keys it registers under.
#[derive(Clone)]
pub struct ConsumerSource {
    backend: Arc<dyn Backend>,
    keys: Vec<ServiceKey>,
}

/// One served service's consumers, or why they could not be listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceConsumers {
    #[serde(flatten)]
    pub listing: ConsumerListing,
    /// Set when the registry did not answer (the listing is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ConsumerSource {
    /// Lists the consumers of `keys` in `backend`.
    pub fn new(backend: Arc<dyn Backend>, keys: Vec<ServiceKey>) -> ConsumerSource {
        ConsumerSource { backend, keys }
    }

    /// Every key's consumers now, listed concurrently, each bounded by [`LIST_TIMEOUT`].
    pub(crate) async fn list(&self) -> Vec<ServiceConsumers> {
        let lists = self.keys.iter().map(|key| async move {
            let listed = tokio::time::timeout(LIST_TIMEOUT, self.backend.consumers(key)).await;
            match listed {
                Ok(Ok(listing)) => ServiceConsumers {
                    listing,
                    error: None,
                },
                Ok(Err(e)) => failed(key, e.to_string()),
                Err(_) => failed(
                    key,
                    format!("the registry did not answer within {LIST_TIMEOUT:?}"),
                ),
            }
        });
        futures::future::join_all(lists).await
    }
}

fn failed(key: &ServiceKey, error: String) -> ServiceConsumers {
    ServiceConsumers {
        listing: ConsumerListing::of(key),
        error: Some(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_registry_that_keeps_no_consumers_is_reported_not_hidden() {
        let options = axle_discovery::BackendOptions {
            parse_endpoints: |_, _, _| Ok(Default::default()),
            manifest_endpoints: Default::default(),
            lease_ttl: Duration::from_secs(10),
            resync: Duration::from_secs(1),
            file_poll: Duration::from_secs(1),
            etcd: Default::default(),
        };
        let backend = axle_discovery::open(&axle_discovery::RegistryUrl::Static, options).unwrap();
        let key = ServiceKey::new("default", "echo", "default").unwrap();
        let listed = ConsumerSource::new(backend, vec![key]).list().await;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].listing.service, "echo");
        assert!(listed[0].listing.consumers.is_empty());
        let error = listed[0].error.as_deref().unwrap();
        assert!(error.contains("keeps no consumers"), "{error}");
    }
}
