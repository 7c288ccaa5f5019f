//! Following services' run-time rules (`axle rules`): each service's version now, then
//! every new one, handed to an applier — a client's (`rules_follow.rs`: governance, routes,
//! weights) or a provider's (`serve_rules.rs`: limits). What a version means is the
//! applier's; reading and following etcd is here, once.

use std::sync::Arc;

use axle::discovery::rules::{RuleVersion, Rules};

/// Following the rules; stops when dropped.
pub struct Following {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Following {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Hands each of `services`' current rule to `apply` now (`None`: no rule), then each new
/// version as it is written. A rule etcd cannot give yet is followed all the same.
pub async fn follow<F>(
    rules: &Rules,
    services: Vec<String>,
    apply: Arc<F>,
) -> anyhow::Result<Following>
where
    F: Fn(&str, Option<&RuleVersion>) + Send + Sync + 'static,
{
    let mut tasks = Vec::new();
    for service in services {
        let mut seen = match rules.get(&service).await {
            Ok(now) => {
                apply(&service, now.as_ref());
                now.map(|v| v.revision)
            }
            Err(e) => {
                tracing::warn!(service, error = %e, "cannot read the service's rule yet; following it");
                None
            }
        };
        let mut updates = rules.follow(&service)?;
        let apply = apply.clone();
        tasks.push(tokio::spawn(async move {
            while updates.changed().await.is_ok() {
                let now = updates.borrow_and_update().clone();
                let revision = now.as_ref().map(|v| v.revision);
                if revision != seen {
                    seen = revision;
                    // Applying loads plugins (compiles, instantiates): off the runtime's
                    // worker threads.
                    let apply = apply.clone();
                    let service = service.clone();
                    let _ =
                        tokio::task::spawn_blocking(move || apply(&service, now.as_ref())).await;
                }
            }
        }));
    }
    Ok(Following { tasks })
}
