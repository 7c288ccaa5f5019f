//! Delayed exposure: a provider becomes visible only once it can serve. The server knows
//! nothing of registries and the registry nothing of servers; this is where the two meet:
//! ready → register → (on shutdown) deregister before the drain.

use std::time::Duration;

use axle_discovery::{unix_ms, Backend, DiscoveryError, Provider, ServiceKey};
use axle_server::Server;

/// Waits until `server` is ready (its readiness hook, at most `ready_timeout`), then
/// registers `instance` under every key in `keys` with `backend`. The instance's start
/// time is set now, so consumers' warm-up starts when it is first visible. The
/// registrations are removed when the server shuts down, after it stops taking new
/// requests and before it drains. Returns the registry keys.
pub async fn register(
    server: &mut Server,
    backend: &dyn Backend,
    keys: &[ServiceKey],
    mut instance: Provider,
    ready_timeout: Duration,
) -> Result<Vec<String>, DiscoveryError> {
    server
        .ready(ready_timeout)
        .await
        .map_err(DiscoveryError::NotReady)?;
    instance.start_ms = Some(unix_ms());
    let mut done = Vec::new();
    for key in keys {
        let registration = backend.register(key, &instance).await?;
        done.push(registration.key().to_string());
        server.on_closing(Box::pin(registration.deregister()));
    }
    Ok(done)
}
