//! The `swap` admin method: `{"slot": SLOT, "plugin": NAME}` → the swap's report, or an
//! error saying why the running plugins stay (`axle swap` prints it and exits non-zero).

use std::sync::Arc;

use serde_json::Value;

use super::Targets;
use axle_server::Status;

pub async fn swap(targets: Arc<Targets>, body: Value) -> Result<Value, Status> {
    let swapper = targets
        .swapper
        .clone()
        .ok_or_else(|| Status::bad_request("this kernel does not offer swaps"))?;
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Status::bad_request(format!("`{name}` (a string) is required")))
    };
    let (slot, plugin) = (field("slot")?, field("plugin")?);
    // Loading may compile: off the runtime's worker threads.
    let report = tokio::task::spawn_blocking(move || swapper.swap_slot(&slot, &plugin))
        .await
        .map_err(|e| Status::internal(format!("the swap did not finish: {e}")))?
        .map_err(|e| Status::bad_request(format!("{e:#}")))?;
    serde_json::to_value(report).map_err(|e| Status::internal(e.to_string()))
}
