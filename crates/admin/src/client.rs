//! Asking an admin endpoint: one request on a fresh connection (`axle stats --admin`).
//! Deliberately not a [`axle_client::Client`]: an operator's tool should not load
//! plugins or need a manifest to read another process's counters.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use super::{AdminError, JSON, SERVICE};
use axle_transport::connection::Connection;
use axle_transport::Keepalive;
use axle_wire::{Limits, Metadata};

/// Calls admin method `method` at `addr` with `body`, waiting up to `timeout`.
pub async fn request(
    addr: &str,
    method: &str,
    body: &Value,
    timeout: Duration,
) -> Result<Value, AdminError> {
    let deadline = Instant::now() + timeout;
    let transport = |source| AdminError::Transport {
        addr: addr.to_string(),
        source,
    };
    let conn = Connection::connect(addr, Limits::default(), Keepalive::default(), None)
        .await
        .map_err(transport)?;
    let payload = serde_json::to_vec(body).map_err(|e| AdminError::Json(e.to_string()))?;
    let meta = Metadata {
        service: Some(SERVICE.into()),
        method: Some(method.into()),
        deadline_us: Some(timeout.as_micros() as u64),
        content_type: Some(JSON.into()),
        ..Metadata::default()
    };
    let answer = conn.call(0, meta, Bytes::from(payload), deadline).await;
    conn.close();
    let frame = answer.map_err(transport)?;
    if let Some(class) = frame.meta.error_class {
        return Err(AdminError::Remote {
            class,
            message: frame.meta.error_message.unwrap_or_default(),
        });
    }
    serde_json::from_slice(&frame.payload).map_err(|e| AdminError::Json(e.to_string()))
}
