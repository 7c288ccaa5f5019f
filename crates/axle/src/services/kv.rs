//! `kv`: an in-memory map. `get` is idempotent; `put` is not (it returns the previous
//! value, so running it twice is observable).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use axle_server::{ServerBuilder, Status};

#[derive(Deserialize)]
struct Get {
    key: String,
}

#[derive(Deserialize)]
struct Put {
    key: String,
    value: serde_json::Value,
}

#[derive(Serialize)]
struct Entry {
    key: String,
    value: serde_json::Value,
}

#[derive(Serialize)]
struct Replaced {
    key: String,
    previous: Option<serde_json::Value>,
    /// How many puts this provider has applied in all (makes double execution visible).
    puts: u64,
}

#[derive(Default)]
struct Store {
    map: HashMap<String, serde_json::Value>,
    puts: u64,
}

pub fn register(builder: ServerBuilder) -> ServerBuilder {
    let store: Arc<Mutex<Store>> = Arc::default();
    let s = store.clone();
    builder
        .typed("kv", "get", move |req: Get, _ctx| {
            let found = s
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map
                .get(&req.key)
                .cloned();
            async move {
                match found {
                    Some(value) => Ok(Entry {
                        key: req.key,
                        value,
                    }),
                    // A code callers can match on: a replica that has not seen the key
                    // yet may be worth another try elsewhere (`retry-on-business`).
                    None => Err(Status::business_code(
                        "no-such-key",
                        format!("no key `{}`", req.key),
                    )),
                }
            }
        })
        .typed("kv", "put", move |req: Put, _ctx| {
            let mut st = store.lock().unwrap_or_else(|e| e.into_inner());
            st.puts += 1;
            let previous = st.map.insert(req.key.clone(), req.value);
            let puts = st.puts;
            async move {
                Ok(Replaced {
                    key: req.key,
                    previous,
                    puts,
                })
            }
        })
}
