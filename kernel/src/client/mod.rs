//! The caller's side: a [`Client`] makes calls through the pipeline of DESIGN.md, one
//! stage per file in `stages/`:
//!
//! ```text
//! route (router plugins, memoised) -> select (selector plugin) -> encode (serializer
//! plugin, skipped for raw bytes) -> send (multiplexed connection, deadline) -> feedback
//! (kernel facts + selector) -> decode
//! ```
//!
//! Deadlines, retries and breakers (governance) and health filtering wrap these stages
//! without reshaping them.

mod error;
mod options;
mod registry;
pub mod stages;

pub use error::CallError;
pub use options::CallOptions;
pub use registry::{ClientConfig, EndpointView};

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::payload;
use crate::plugin::kinds::serializer::Value;
use crate::plugin::PluginHost;
use registry::Registry;

/// The answer of a raw call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The response body.
    pub payload: Bytes,
    /// How the body is encoded.
    pub content_type: String,
    /// The endpoint that answered.
    pub endpoint: u32,
}

/// Makes calls to the services a manifest (or the caller) names.
#[derive(Clone)]
pub struct Client {
    registry: Arc<Registry>,
}

impl Client {
    /// A client for `config`, loading the plugins its manifest names into `host`.
    pub fn new(host: &PluginHost, config: ClientConfig) -> anyhow::Result<Client> {
        Ok(Client {
            registry: Arc::new(Registry::build(host, config)?),
        })
    }

    /// A typed call: `req` is encoded by the service's serializer plugin, the answer
    /// decoded by the serializer of the content type it came back in.
    pub async fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        service: &str,
        method: &str,
        req: &Req,
        options: &CallOptions,
    ) -> Result<Resp, CallError> {
        let value = self
            .call_value(
                service,
                method,
                &payload::to_value(req).map_err(CallError::Encode)?,
                options,
            )
            .await?;
        payload::from_value(&value).map_err(CallError::Decode)
    }

    /// A call with a value in the serializers' model (what `axle call` uses for JSON).
    pub async fn call_value(
        &self,
        service: &str,
        method: &str,
        value: &Value,
        options: &CallOptions,
    ) -> Result<Value, CallError> {
        Ok(self.call_value_at(service, method, value, options).await?.0)
    }

    /// [`Client::call_value`], also saying which endpoint answered.
    pub async fn call_value_at(
        &self,
        service: &str,
        method: &str,
        value: &Value,
        options: &CallOptions,
    ) -> Result<(Value, u32), CallError> {
        let svc = self.registry.service(service)?;
        let (body, content_type) = stages::encode::encode(&svc, value)?;
        let reply = self
            .invoke(service, method, body, &content_type, options)
            .await?;
        Ok((
            stages::encode::decode(&self.registry, &reply)?,
            reply.endpoint,
        ))
    }

    /// A call whose payload is already bytes (content type `raw` unless `content_type`
    /// says otherwise): no serializer runs.
    pub async fn call_raw(
        &self,
        service: &str,
        method: &str,
        body: Bytes,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        self.invoke(service, method, body, payload::RAW, options)
            .await
    }

    /// route → select → send → feedback, for one attempt.
    async fn invoke(
        &self,
        service: &str,
        method: &str,
        body: Bytes,
        content_type: &str,
        options: &CallOptions,
    ) -> Result<Reply, CallError> {
        let svc = self.registry.service(service)?;
        let now = Instant::now();
        let deadline = now + options.timeout.unwrap_or(svc.timeout);
        let set = stages::route::candidates(&svc, method, options)?;
        let endpoint = stages::select::pick(&svc, set, options)?;
        let ep = self
            .registry
            .endpoint(endpoint)
            .ok_or_else(|| CallError::NoEndpoint {
                service: service.to_string(),
                reason: format!("the selector picked unknown endpoint {endpoint}"),
            })?;
        let started = stages::feedback::started(ep, now);
        let budget = deadline - now;
        let result = stages::send::send(
            ep,
            &svc,
            method,
            body,
            content_type,
            options,
            deadline,
            budget,
        )
        .await;
        stages::feedback::finished(&svc, ep, started, &result);
        result
    }

    /// Per-endpoint facts as this client measured them.
    pub fn endpoints(&self) -> Vec<EndpointView> {
        self.registry.views()
    }
}
