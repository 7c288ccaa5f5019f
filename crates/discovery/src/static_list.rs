//! The embedded default: the manifest's `[services.<s>] endpoints`, fixed for the life of
//! the process. An endpoint's group is its `group` tag ([`defaults::GROUP`] without one),
//! so groups work the same with no registry installed.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use super::{Backend, Listing, Provider, ServiceKey};
use crate::{defaults, EndpointSpec};

/// The manifest's endpoint lists.
pub struct StaticList {
    endpoints: BTreeMap<String, Vec<EndpointSpec>>,
}

impl StaticList {
    pub fn new(endpoints: BTreeMap<String, Vec<EndpointSpec>>) -> StaticList {
        StaticList { endpoints }
    }
}

/// The group an endpoint of a list belongs to.
pub fn group_of(spec: &EndpointSpec) -> &str {
    spec.tags
        .iter()
        .find(|(k, _)| k == "group")
        .map_or(defaults::GROUP, |(_, v)| v.as_str())
}

/// An instance for a listed endpoint: no start time, so no warm-up (a list is "always
/// there"); the `group` tag stays a tag.
pub fn instance_of(spec: &EndpointSpec) -> Provider {
    Provider {
        address: spec.address.clone(),
        weight: spec.weight,
        tags: spec.tags.iter().cloned().collect(),
        zone: None,
        start_ms: None,
        warmup_ms: None,
        version: None,
    }
}

/// The instances of `key.service` in `key.group` from `lists`.
pub fn select(lists: &BTreeMap<String, Vec<EndpointSpec>>, key: &ServiceKey) -> Vec<Provider> {
    let mut out: Vec<Provider> = lists
        .get(&key.service)
        .into_iter()
        .flatten()
        .filter(|s| group_of(s) == key.group)
        .map(instance_of)
        .collect();
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out.dedup_by(|a, b| a.address == b.address);
    out
}

impl Backend for StaticList {
    fn describe(&self) -> String {
        "static (the manifest's endpoints)".into()
    }

    fn subscribe(&self, key: &ServiceKey) -> watch::Receiver<Listing> {
        let (_tx, rx) = watch::channel(Listing {
            revision: 1,
            instances: Arc::new(select(&self.endpoints, key)),
            connected: true,
            lists: 1,
            ..Listing::default()
        });
        rx
    }
}
