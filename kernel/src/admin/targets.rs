//! What admin methods act on: the running kernel's clients and servers, by name.

use std::collections::BTreeMap;

use crate::client::Client;
use crate::server::ServerObserver;

/// The clients and servers an admin endpoint exposes (a demo: one consumer client and
/// three providers; `axle serve`: one server).
#[derive(Clone, Default)]
pub struct Targets {
    pub clients: BTreeMap<String, Client>,
    pub servers: BTreeMap<String, ServerObserver>,
    /// Swaps this kernel's plugins (the `swap` method); none: swapping is not offered.
    pub swapper: Option<std::sync::Arc<crate::swap::Swapper>>,
}

impl Targets {
    /// The client named `name`, or a `not_found` naming the ones there are.
    pub fn client(&self, name: &str) -> Result<&Client, crate::server::Status> {
        self.clients
            .get(name)
            .ok_or_else(|| not_found("client", name, self.clients.keys()))
    }

    /// The server named `name`, or a `not_found` naming the ones there are.
    pub fn server(&self, name: &str) -> Result<&ServerObserver, crate::server::Status> {
        self.servers
            .get(name)
            .ok_or_else(|| not_found("server", name, self.servers.keys()))
    }
}

fn not_found<'a>(
    what: &str,
    name: &str,
    have: impl Iterator<Item = &'a String>,
) -> crate::server::Status {
    crate::server::Status {
        class: crate::wire::ErrorClass::NotFound,
        message: format!(
            "no {what} `{name}` here (have: {})",
            have.cloned().collect::<Vec<_>>().join(", ")
        ),
    }
}
