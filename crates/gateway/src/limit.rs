//! The manifest's limiter at the edge, keyed on the HTTP client's address. Behind the
//! gateway every request reaches the provider from the gateway's own address, so the
//! provider's limiter cannot tell one HTTP client from another: the gateway asks the same
//! limiter plugin first, with the client's IP as the caller address (`key-on` decides
//! whether the address and the `x-axle-app` name count, as on a provider).

use std::net::IpAddr;
use std::sync::Arc;

use axle::client::CallOptions;
use axle::manifest::Manifest;
use axle::plugin::kinds::limiter::{Admission, KeyParts, LimiterPlugin};
use axle::plugin::{Plugin, PluginHost};

use crate::routes::Target;
use crate::status::HttpError;

/// The limiter the manifest's `limiter` slot names, asked once per HTTP request.
pub struct ClientLimiter {
    plugin: Arc<LimiterPlugin>,
}

impl ClientLimiter {
    /// The manifest's limiter (`None` when its `limiter` slot is empty).
    pub fn from_manifest(host: &PluginHost, manifest: &Manifest) -> anyhow::Result<Option<Self>> {
        let Some(name) = &manifest.slots.limiter else {
            return Ok(None);
        };
        let spec = manifest.plugins.get(name).ok_or_else(|| {
            anyhow::anyhow!("the limiter slot names `{name}`, which is not a plugin")
        })?;
        match host.load(spec)?.plugin {
            Plugin::Limiter(plugin) => Ok(Some(ClientLimiter { plugin })),
            _ => anyhow::bail!("the limiter slot names `{name}`, which is not a limiter"),
        }
    }

    /// Admits the request or refuses it with 429 and the plugin's retry-after. Keys use
    /// only names the manifest declares (another method is `*`), so a client inventing
    /// paths cannot grow the limiter's key table.
    pub fn admit(
        &self,
        manifest: &Manifest,
        target: &Target,
        options: &CallOptions,
        ip: IpAddr,
    ) -> Result<(), HttpError> {
        let declared = manifest
            .method_governance
            .contains_key(&(target.service.clone(), target.method.clone()));
        let key = self.plugin.key_id_of(KeyParts {
            service: &target.service,
            method: if declared { &target.method } else { "*" },
            consumer_app: options.consumer_app.as_deref().unwrap_or(""),
            consumer_ip: ip,
        });
        match self.plugin.acquire(key, 1).admission {
            Admission::Admit => Ok(()),
            Admission::Reject { retry_after_ms } => {
                let mut e = HttpError::new(
                    http::StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!("rate limited ({ip})"),
                );
                e.retry_after_ms = Some(retry_after_ms);
                Err(e)
            }
        }
    }
}
