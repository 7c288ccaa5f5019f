//! A client is what discovery drives: its endpoint table follows the registry's
//! snapshots (see `axle_discovery::follow`).

use axle_core::EndpointSpec;
use axle_discovery::follow::Target;

impl Target for crate::Client {
    fn set_endpoints(&self, service: &str, endpoints: Vec<EndpointSpec>) {
        if let Err(e) = crate::Client::set_endpoints(self, service, endpoints) {
            tracing::warn!(service, "discovery cannot update the client: {e:#}");
        }
    }

    fn admissible(&self, _service: &str, addresses: &[&str]) -> usize {
        self.endpoints()
            .iter()
            .filter(|e| e.in_rotation && addresses.contains(&e.address.as_str()))
            .count()
    }

    fn set_warmups(&self, _service: &str, warmups: &[(String, u32)]) {
        crate::Client::set_warmups(self, warmups);
    }
}
