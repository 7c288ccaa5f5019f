//! "Push and pull, pull is the truth": a consumer's set of one discovery key, kept
//! consistent with a registry's revisions whatever order listings and events arrive in.
//!
//! A listing at revision R is the whole truth up to R: it replaces the set when R is at
//! least the revision already applied (an older listing — a slow answer overtaken by
//! events — is discarded). An event at revision R changes one key; it is stale, and
//! discarded, when R is not above the revision applied (the listing already contains it,
//! or a later event superseded it).

use std::collections::BTreeMap;

use super::Provider;

/// The set of one key and the revision it is consistent with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracked {
    /// By registry key suffix (the address).
    pub set: BTreeMap<String, Provider>,
    /// The highest revision applied.
    pub applied: i64,
}

impl Tracked {
    /// Applies a full listing taken at `revision`; false if it was older than the set.
    pub fn listing(&mut self, revision: i64, set: BTreeMap<String, Provider>) -> bool {
        if revision < self.applied {
            return false;
        }
        self.set = set;
        self.applied = revision;
        true
    }

    /// Applies a put (`Some`) or delete (`None`) of `address` at `revision`; false if it
    /// was stale.
    pub fn event(&mut self, revision: i64, address: String, instance: Option<Provider>) -> bool {
        if revision <= self.applied {
            return false;
        }
        self.applied = revision;
        match instance {
            Some(i) => self.set.insert(address, i),
            None => self.set.remove(&address),
        };
        true
    }
}
