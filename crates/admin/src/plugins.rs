//! The `plugins` admin method: every client's and server's plugins with their counters
//! (calls, faults by cause, quarantine, instance replacements): what runs where, as
//! `GET /plugins` and `axle.admin/plugins` answer, before and after a swap.

use std::sync::Arc;

use serde_json::{json, Value};

use super::Targets;
use axle_server::Status;

/// The method: takes nothing.
pub async fn plugins(targets: Arc<Targets>, _body: Value) -> Result<Value, Status> {
    let encode = |v| serde_json::to_value(v).map_err(|e| Status::internal(e.to_string()));
    let mut clients = serde_json::Map::new();
    for (name, c) in &targets.clients {
        clients.insert(name.clone(), encode(c.plugins())?);
    }
    let mut servers = serde_json::Map::new();
    for (name, s) in &targets.servers {
        servers.insert(name.clone(), encode(s.plugins())?);
    }
    Ok(json!({ "clients": clients, "servers": servers }))
}
