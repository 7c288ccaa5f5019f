//! Routers narrow the candidates of a request (ROUTE = FILTER).

use crate::{Config, EndpointId, EndpointTable, RouteRequest};

/// A routing rule. Implement this and call [`crate::export_router!`].
///
/// `route` must depend only on the table, the config and its arguments: the kernel
/// memoises answers per table version and request shape.
pub trait Router: Sized + 'static {
    /// Validates the manifest config and builds the plugin.
    fn new(config: &Config) -> Result<Self, String>;

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
