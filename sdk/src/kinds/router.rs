//! Routers narrow the candidates of a request (ROUTE = FILTER).

use crate::{Config, EndpointId, EndpointTable, RouteReads, RouteRequest};

/// A routing rule. Implement this and call [`crate::export_router!`].
///
/// `route` must depend only on the table, the config and the parts of the request it
/// declared: the kernel memoises answers per table version and value of those parts.
pub trait Router: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;

    /// The parts of a request `route` reads (asked once, after `new`). There is no
    /// default on purpose: the kernel fills only these and keys its memo by them, so
    /// "everything" would make every distinct field value a new route computation, and
    /// "nothing" would hide the parts the router needs.
    fn declare(&self) -> RouteReads;

    /// The subset of `candidates` this request may reach.
    fn route(
        &mut self,
        table: &EndpointTable,
        candidates: &[EndpointId],
        request: &RouteRequest,
    ) -> Vec<EndpointId>;

    /// The table changed.
    fn endpoints_changed(&mut self, _table: &EndpointTable) {}
}

/// Keeps the table for a [`Router`].
pub struct RouterRuntime<T: Router> {
    plugin: T,
    table: EndpointTable,
}

impl<T: Router> RouterRuntime<T> {
    /// `init`.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(RouterRuntime {
            plugin: T::new(config)?,
            table: EndpointTable::default(),
        })
    }

    /// `declare`.
    pub fn declare(&self) -> RouteReads {
        self.plugin.declare()
    }

    /// `endpoints-changed`.
    pub fn endpoints_changed(&mut self, table: EndpointTable) {
        self.plugin.endpoints_changed(&table);
        self.table = table;
    }

    /// `route`.
    pub fn route(&mut self, candidates: &[EndpointId], request: &RouteRequest) -> Vec<EndpointId> {
        self.plugin.route(&self.table, candidates, request)
    }
}
