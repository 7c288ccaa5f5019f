//! An endpoint as configuration names it (a manifest's list, a discovery listing, the
//! caller's own `set_endpoints`): the kernel assigns it an id when it joins a client.

/// An endpoint's weight when nothing says otherwise (Dubbo's default).
pub const DEFAULT_WEIGHT: u32 = 100;

/// One provider endpoint of a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSpec {
    /// `host:port`.
    pub address: String,
    /// Relative weight (default [`DEFAULT_WEIGHT`]).
    pub weight: u32,
    /// Tags (zone, lane, version, ...).
    pub tags: Vec<(String, String)>,
}

impl EndpointSpec {
    /// An endpoint with the default weight and no tags.
    pub fn new(address: impl Into<String>) -> Self {
        EndpointSpec {
            address: address.into(),
            weight: DEFAULT_WEIGHT,
            tags: Vec::new(),
        }
    }
}
