//! `axle serve`'s side of the cluster view (`axle::plugin::cluster`): how many providers
//! serve each of its services, for limiters that share a cluster-wide rate out
//! (`cluster-rate`). With a registry that takes registrations (etcd) the count is what
//! discovery lists for the service, followed for as long as the process serves; without
//! one, the endpoints the manifest lists for the service, or 1 when it lists none.

use std::sync::Arc;

use axle::discovery::{Backend, ServiceKey};
use axle::manifest::Manifest;
use axle::plugin::cluster::ClusterView;

/// Sets the static counts now and, with a registry, follows it; the returned tasks stop
/// when dropped (`abort` on drop, so a stopping server leaves nothing behind).
pub fn follow(
    view: &Arc<ClusterView>,
    backend: Option<&Arc<dyn Backend>>,
    keys: &[ServiceKey],
    manifest: &Manifest,
) -> Vec<AbortOnDrop> {
    for key in keys {
        let listed = manifest.endpoints.get(&key.service).map_or(0, Vec::len);
        view.set(&key.service, listed.max(1) as u32);
    }
    let Some(backend) = backend else {
        return Vec::new();
    };
    keys.iter()
        .map(|key| {
            let mut rx = backend.subscribe(key);
            let view = view.clone();
            let service = key.service.clone();
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    {
                        let listing = rx.borrow_and_update();
                        // Nothing listed yet is no news: keep the count until the registry
                        // has answered once.
                        if listing.lists > 0 || listing.revision > 0 {
                            let n = listing.instances.len() as u32;
                            if view.set(&service, n) {
                                tracing::info!(
                                    service = %service,
                                    providers = n.max(1),
                                    "providers of the service changed"
                                );
                            }
                        }
                    }
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            }))
        })
        .collect()
}

/// A task aborted when its handle is dropped.
pub struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
