//! What a call reads of its service, in one load: the method policies and the rotation
//! (`Current`), replaced whole when either changes. A call counts one reference to it and
//! borrows its policy, candidates and endpoint from it (`docs/performance.md`, "One load a
//! call").

use std::sync::Arc;

use crate::stages::route_memo::Shapes;
use crate::state::{Endpoint, MethodPolicy, Policies};
use axle_plugin_host::kinds::selector::SelectorPlugin;

/// The endpoints of a service that selection may use now, and the set that names them in
/// each selector. Replaced whole when health or membership changes.
pub struct Rotation {
    pub members: Arc<[u32]>,
    /// Selector id → set id of `members` in that selector.
    sets: rustc_hash::FxHashMap<u64, u32>,
    /// The members themselves, by id: a call picks among the members and borrows the one
    /// picked from here, so it neither loads the client's endpoint table nor counts a
    /// reference of its own on the endpoint (`docs/performance.md`, "One load a call").
    /// A rotation holds only its own members, so an endpoint that leaves every service
    /// is released once the rotations that had it are replaced.
    endpoints: rustc_hash::FxHashMap<u32, Arc<Endpoint>>,
}

impl Rotation {
    /// The set of all the rotation's members in `selector`.
    pub fn set_in(&self, selector: &SelectorPlugin) -> Option<u32> {
        self.sets.get(&selector.id()).copied()
    }

    /// Member `id` (none: not a member of this rotation).
    pub fn endpoint(&self, id: u32) -> Option<&Arc<Endpoint>> {
        self.endpoints.get(&id)
    }

    /// A rotation of `members` (interned as `sets`, selector id → set id), holding their
    /// `endpoints`.
    pub(crate) fn new(
        members: Arc<[u32]>,
        sets: rustc_hash::FxHashMap<u64, u32>,
        endpoints: rustc_hash::FxHashMap<u32, Arc<Endpoint>>,
    ) -> Rotation {
        Rotation {
            members,
            sets,
            endpoints,
        }
    }

    /// An empty rotation, before the first membership.
    pub(crate) fn empty() -> Rotation {
        Rotation {
            members: Arc::from([]),
            sets: rustc_hash::FxHashMap::default(),
            endpoints: rustc_hash::FxHashMap::default(),
        }
    }

    /// Whether this rotation has exactly `admitted`, as the endpoints `get` finds now (an
    /// endpoint that left and came back under the same id is a new one).
    pub(crate) fn holds(
        &self,
        admitted: &[u32],
        get: impl Fn(u32) -> Option<Arc<Endpoint>>,
    ) -> bool {
        *self.members == *admitted
            && admitted
                .iter()
                .all(|id| match (self.endpoint(*id), get(*id)) {
                    (Some(held), Some(now)) => Arc::ptr_eq(held, &now),
                    _ => false,
                })
    }
}

/// A service's current policies and rotation, as one value: what a call reads, in one
/// load. A call holds one count on it (it outlives awaits), and borrows its policy,
/// candidates and endpoint from it, where it used to load and count each of them
/// (`docs/performance.md`, "One load a call"). Replaced whole when either part is.
pub struct Current {
    pub policies: Arc<Policies>,
    pub rotation: Arc<Rotation>,
    /// Each policy's memoised routes (by `MethodPolicy::index`), made from this
    /// rotation: new with it, so a call borrows them too ("Routes kept with the
    /// rotation").
    routes: Box<[Shapes]>,
}

impl Current {
    pub(crate) fn new(policies: Arc<Policies>, rotation: Arc<Rotation>) -> Current {
        let routes = policies.all().map(|_| Shapes::default()).collect();
        Current {
            policies,
            rotation,
            routes,
        }
    }

    /// The routes `policy` (one of these policies) memoised for this rotation.
    pub fn routes(&self, policy: &MethodPolicy) -> Option<&Shapes> {
        self.routes.get(policy.index)
    }
}
