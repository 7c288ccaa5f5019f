//! What admin methods act on: the running kernel's clients and servers, by name.

use std::collections::BTreeMap;

use axle_client::Client;
use axle_server::ServerObserver;

/// The clients and servers an admin endpoint exposes (a demo: one consumer client and
/// three providers; `axle serve`: one server).
#[derive(Clone, Default)]
pub struct Targets {
    pub clients: BTreeMap<String, Client>,
    pub servers: BTreeMap<String, ServerObserver>,
    /// Swaps this kernel's plugins (the `swap` method); none: swapping is not offered.
    pub swapper: Option<std::sync::Arc<axle_swap::Swapper>>,
    /// Recent health, breaker and quarantine events (the `events` method).
    pub events: std::sync::Arc<crate::events::EventLog>,
    /// Where the consumers of the served services are listed (a kernel registered on
    /// etcd); none: `stats` lists no consumers.
    pub consumers: Option<crate::ConsumerSource>,
    /// The run-time rules this kernel's servers follow (a provider on etcd takes the
    /// `[limits]` of its services' rules); none: no rules are followed.
    pub server_rules: Option<axle_client::rules::RuleBook>,
}

impl Targets {
    /// The client named `name`, or a `not_found` naming the ones there are.
    pub fn client(&self, name: &str) -> Result<&Client, axle_server::Status> {
        self.clients
            .get(name)
            .ok_or_else(|| not_found("client", name, self.clients.keys()))
    }

    /// The server named `name`, or a `not_found` naming the ones there are.
    pub fn server(&self, name: &str) -> Result<&ServerObserver, axle_server::Status> {
        self.servers
            .get(name)
            .ok_or_else(|| not_found("server", name, self.servers.keys()))
    }
}

fn not_found<'a>(
    what: &str,
    name: &str,
    have: impl Iterator<Item = &'a String>,
) -> axle_server::Status {
    axle_server::Status::new(
        axle_wire::ErrorClass::NotFound,
        format!(
            "no {what} `{name}` here (have: {})",
            have.cloned().collect::<Vec<_>>().join(", ")
        ),
    )
}
