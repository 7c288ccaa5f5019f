//! The admin endpoint: a running kernel's own `axle.admin` service, on a separate
//! loopback listener, served by Axle's own transport and server pipeline, JSON in and out
//! — and, on the same listener, HTTP for curl and Prometheus (`http/`; the first byte of
//! each connection tells which, `listener.rs`).
//!
//! An [`Admin`] holds what it exposes — named [`Client`]s and [`Server`]s — and a table of
//! methods. Built in: `stats` (both views, [`StatsReport`]), `plugins` (every plugin's
//! counters), `events` (recent health, breaker and quarantine changes, `events.rs`) and
//! `methods` (the table's names). Adding one is one function and one line:
//!
//! ```ignore
//! async fn swap(targets: Arc<Targets>, body: serde_json::Value) -> Result<Value, Status> {
//!     let client = targets.client(body["client"].as_str().unwrap_or_default())?;
//!     /* ... */
//! }
//! let admin = Admin::new().client("demo", client).method("swap", swap);
//! ```
//!
//! Over HTTP the same functions answer `GET /stats`, `GET /plugins`, `GET /events` and
//! `POST /swap`; `GET /` is a live dashboard drawn from them (`http/dashboard.rs`).

mod address;
mod client;
mod consumers;
mod error;
pub mod events;
pub mod http;
mod listener;
mod method;
mod plugins;
mod stats;
mod swap;
mod targets;
mod watch;

pub use address::{resolve, Exposure};
pub use client::request;
pub use consumers::{ConsumerSource, ServiceConsumers};
pub use error::AdminError;
pub use http::token::{Token, TOKEN_ENV};
pub use method::{handler, method, AdminMethod, JSON};
pub use stats::{stats, ClientStats, ServerStats, StatsReport};
pub use targets::Targets;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use axle_client::Client;
use axle_server::{Server, ServerBuilder, Status};

/// The admin service's name on the wire.
pub const SERVICE: &str = "axle.admin";

/// Where the admin endpoint listens unless told otherwise (next to `axle serve`'s 7300).
pub const DEFAULT_ADDR: &str = "127.0.0.1:7301";

/// Builds an admin endpoint.
pub struct Admin {
    targets: Targets,
    methods: BTreeMap<String, AdminMethod>,
    token: Option<Token>,
}

impl Default for Admin {
    fn default() -> Self {
        Admin::new()
    }
}

impl Admin {
    /// An admin endpoint with the built-in methods and nothing to expose yet.
    pub fn new() -> Self {
        Admin {
            targets: Targets::default(),
            methods: BTreeMap::new(),
            token: None,
        }
        .method("stats", stats)
        .method("plugins", plugins::plugins)
        .method("events", events::events)
    }

    /// The bearer token `POST /swap` must carry (none: HTTP swaps are refused; the frame
    /// protocol's `swap` stays as it was, for `axle swap` on this host).
    pub fn token(mut self, token: Option<Token>) -> Self {
        self.token = token;
        self
    }

    /// Exposes `client` as `name`.
    pub fn client(mut self, name: &str, client: Client) -> Self {
        self.targets.clients.insert(name.to_string(), client);
        self
    }

    /// Offers the `swap` method: `{"slot": "selector", "plugin": "p2c-ewma"}` fills a
    /// slot of this kernel's clients and servers through `swapper`.
    pub fn swapper(mut self, swapper: Arc<axle_swap::Swapper>) -> Self {
        self.targets.swapper = Some(swapper);
        self.method("swap", swap::swap)
    }

    /// Lists the consumers of the services this kernel registers (`stats` answers them).
    pub fn consumers(mut self, source: ConsumerSource) -> Self {
        self.targets.consumers = Some(source);
        self
    }

    /// Shows how the run-time rules its servers follow stand (`stats`, per server).
    pub fn server_rules(mut self, book: axle_client::rules::RuleBook) -> Self {
        self.targets.server_rules = Some(book);
        self
    }

    /// Exposes `server` as `name` (its counters; it still stops on its own).
    pub fn server(mut self, name: &str, server: &Server) -> Self {
        self.targets
            .servers
            .insert(name.to_string(), server.observer());
        self
    }

    /// Adds (or replaces) method `name`.
    pub fn method<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(Arc<Targets>, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, Status>> + Send + 'static,
    {
        self.methods.insert(name.to_string(), method(f));
        self
    }

    /// The methods it will serve.
    pub fn method_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.methods.keys().cloned().collect();
        names.push("methods".into());
        names.sort();
        names
    }

    /// Listens on `addr` (loopback only unless `exposure` says otherwise) and serves the
    /// frame protocol and HTTP there. `/readyz` answers 503 until
    /// [`AdminServer::set_ready`].
    pub async fn bind(self, addr: &str, exposure: Exposure) -> Result<AdminServer, AdminError> {
        let at = resolve(addr, exposure).await?;
        let bind_error = |source| AdminError::Bind {
            addr: addr.to_string(),
            source,
        };
        let listener = tokio::net::TcpListener::bind(at)
            .await
            .map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        let names = Value::from(self.method_names());
        let targets = Arc::new(self.targets);
        let watchers = watch::start(&targets);
        let mut builder = ServerBuilder::new().method(
            SERVICE,
            "methods",
            handler(
                targets.clone(),
                method(move |_, _| std::future::ready(Ok(names.clone()))),
            ),
        );
        for (name, m) in &self.methods {
            builder = builder.method(SERVICE, name, handler(targets.clone(), m.clone()));
        }
        let (frames, handed) = tokio::sync::mpsc::channel(HANDOVER_QUEUE);
        let server = builder.serve_handed(handed, local);
        let ready = Arc::new(AtomicBool::new(false));
        let http = Arc::new(http::HttpAdmin {
            targets,
            methods: self.methods,
            token: self.token,
            ready: ready.clone(),
        });
        let accept = tokio::spawn(listener::accept(listener, frames, http));
        tracing::info!(addr = %local, "admin endpoint listening (frames and HTTP)");
        Ok(AdminServer {
            server,
            accept,
            ready,
            local,
            _watchers: watchers,
        })
    }
}

/// Frame connections accepted and not yet taken by the frame server.
const HANDOVER_QUEUE: usize = 64;

/// A listening admin endpoint.
pub struct AdminServer {
    server: Server,
    accept: tokio::task::JoinHandle<()>,
    ready: Arc<AtomicBool>,
    local: SocketAddr,
    /// Fill the event ring; stopped when this is dropped.
    _watchers: watch::Watchers,
}

impl AdminServer {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Whether `GET /readyz` answers ready (the kernel serves, and is registered where it
    /// registers); it also answers 503 once any exposed server is stopping.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Relaxed);
    }

    /// Stops it (requests in flight get `drain` to finish).
    pub async fn shutdown(self, drain: Duration) {
        self.set_ready(false);
        self.accept.abort();
        self.server.shutdown(drain).await;
    }
}

#[cfg(test)]
mod tests;
