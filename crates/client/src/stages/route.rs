//! HEALTH FILTER, then ROUTE = FILTER: starts from the service's rotation (the endpoints
//! health admits, see `health::rotation`) and narrows it with the router plugins, once per
//! request shape and rotation. A shape is the value of exactly the parts of a request the
//! service's routers declared they read (`declare`: tag keys, consumer app, caller
//! address, method, fields); nothing else is filled or compared. The answer is memoised
//! beside the rotation, per method policy, as a candidate set the selector already knows
//! (`route_memo`), so a call costs a short scan here, not a plugin call. Methods the
//! manifest does not declare share one policy and one memo; a router that reads the
//! method sees the name called.

use std::borrow::Cow;
use std::sync::Arc;

use super::route_memo::RouteMemo;
use super::shadow::{self, Shadows};
use crate::loadout::ServiceSlots;
use crate::state::{ClientState, Current, Endpoint, Rotation};
use crate::{Call, CallError};
use axle_plugin_host::kinds::router::{RouteReads, RouteRequest};

/// The candidates of a request: the selector's set id and its members, within the
/// rotation the call read with its policy.
pub struct Candidates<'a> {
    pub set: u32,
    /// The rotation they come from, which holds their endpoints.
    pub rotation: &'a Rotation,
    /// Their ids: the rotation's members, or the routers' subset of them, borrowed from
    /// the route memo (owned only when the memo is full).
    members: Cow<'a, [u32]>,
    /// The service's shadows when this call is sampled (`stages::shadow`): the select
    /// stage shows them its pick.
    pub shadow: Option<Arc<Shadows>>,
}

impl<'a> Candidates<'a> {
    /// Their endpoint ids.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Whether they are the whole rotation (no router narrowed it).
    pub fn whole_rotation(&self) -> bool {
        std::ptr::eq(&*self.members, &*self.rotation.members)
    }

    /// Candidate `id`'s endpoint (none: not in the rotation).
    pub fn endpoint(&self, id: u32) -> Option<&'a Arc<Endpoint>> {
        self.rotation.endpoint(id)
    }
}

/// The parts of one call a shape is made of, borrowed (a memo hit allocates nothing but
/// the declared fields).
struct Shape<'a> {
    reads: &'a RouteReads,
    method: &'a str,
    tags: &'a [(String, String)],
    app: &'a str,
    address: &'a str,
    fields: Vec<(String, String)>,
}

impl Shape<'_> {
    /// Whether memoised request `key` has this shape.
    fn is(&self, key: &RouteRequest) -> bool {
        use axle_core::text::same;
        let r = self.reads;
        (!r.method || same(&key.method, self.method))
            && (!r.consumer_app || same(&key.consumer_app, self.app))
            && (!r.caller_address || same(&key.caller_address, self.address))
            && key.fields == self.fields
            && self
                .tags
                .iter()
                .filter(|(k, _)| r.tags.reads(k))
                .eq(key.tags.iter())
    }

    /// The request the routers are asked with: the declared parts only.
    fn request(self, service: &str) -> RouteRequest {
        let r = self.reads;
        let part = |read: bool, value: &str| {
            if read {
                value.to_string()
            } else {
                String::new()
            }
        };
        RouteRequest {
            service: service.to_string(),
            method: part(r.method, self.method),
            tags: self
                .tags
                .iter()
                .filter(|(k, _)| r.tags.reads(k))
                .cloned()
                .collect(),
            consumer_app: part(r.consumer_app, self.app),
            caller_address: part(r.caller_address, self.address),
            fields: self.fields,
        }
    }
}

/// The candidate set for this call. A sampled call also asks the shadow routers, after
/// the live answer is known and without touching it.
pub fn candidates<'a>(state: &ClientState, call: &Call<'a>) -> Result<Candidates<'a>, CallError> {
    let current = call.current;
    let rotation = &*current.rotation;
    let slots = &call.policy.slots;
    let sampled = shadow::sampled(&slots.shadow);
    let mut live = routed(state, call, current, slots)?;
    if let Some(shadows) = sampled {
        shadow::route(state, call, &shadows, &rotation.members, &live);
        live.shadow = Some(shadows);
    }
    Ok(live)
}

/// The live candidates: the rotation narrowed by the live routers (memoised).
fn routed<'a>(
    state: &ClientState,
    call: &Call<'_>,
    current: &'a Current,
    slots: &ServiceSlots,
) -> Result<Candidates<'a>, CallError> {
    let (svc, policy, options) = (call.svc, call.policy, call.options);
    let rotation = &*current.rotation;
    let whole = || Cow::Borrowed(&rotation.members[..]);
    if rotation.members.is_empty() {
        let listed = svc.members.load().len();
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: if listed == 0 {
                "the service has no endpoints".into()
            } else {
                format!("none of its {listed} endpoints is reachable")
            },
        });
    }
    if slots.routers.is_empty() {
        if let Some(set) = rotation.set_in(&policy.selector) {
            return Ok(Candidates {
                set,
                rotation,
                members: whole(),
                shadow: None,
            });
        }
    }
    let memo = current.routes(policy);
    let reads = &slots.route_reads;
    // Loaded only when a router reads it: an `ArcSwap` load is two locked operations.
    let address = reads.caller_address.then(|| svc.caller_address.load());
    let shape = Shape {
        reads,
        method: call.method,
        tags: &options.tags,
        // The application the request carries (send.rs): the call's, else the client's.
        app: options
            .consumer_app
            .as_deref()
            .or(svc.consumer_app.as_deref())
            .unwrap_or(""),
        address: address.as_deref().map_or("", |a| a.as_str()),
        fields: super::route_fields::of(state, call, &reads.fields),
    };
    let candidates = |m: &'a RouteMemo| Candidates {
        set: m.set,
        rotation,
        members: m.members.as_deref().map_or_else(whole, Cow::Borrowed),
        shadow: None,
    };
    if let Some(hit) = memo.and_then(|m| m.find(|r| shape.is(r))) {
        return Ok(candidates(hit));
    }
    let request = shape.request(&svc.name);
    let mut left = rotation.members.to_vec();
    for router in &slots.routers {
        left = router.route(&left, &request).endpoints;
    }
    if left.is_empty() {
        return Err(CallError::NoEndpoint {
            service: svc.name.clone(),
            reason: format!("no endpoint matches the route ({})", describe(&request)),
        });
    }
    // The memo is per policy, and a policy has one selector: sets never mix plugins.
    let set = policy.selector.intern_set(&left);
    // Routers that keep the whole rotation (a `tag` router and a request without tags)
    // leave nothing to hold: the call borrows the rotation, as without routers.
    let members = (*left != *rotation.members).then(|| left.into_boxed_slice());
    let made = RouteMemo {
        request,
        set,
        members,
    };
    let kept = match memo {
        Some(memo) => memo.keep(made),
        None => Err(made),
    };
    match kept {
        Ok(kept) => Ok(candidates(kept)),
        // Past the memo's bound: this call's own.
        Err(made) => Ok(Candidates {
            set,
            rotation,
            members: made
                .members
                .map_or_else(whole, |m| Cow::Owned(m.into_vec())),
            shadow: None,
        }),
    }
}

/// The parts of a request the routers read, for an error message.
fn describe(r: &RouteRequest) -> String {
    let mut parts = vec![format!("tags {:?}", r.tags)];
    for (name, value) in [
        ("method", &r.method),
        ("app", &r.consumer_app),
        ("address", &r.caller_address),
    ] {
        if !value.is_empty() {
            parts.push(format!("{name} {value:?}"));
        }
    }
    if !r.fields.is_empty() {
        parts.push(format!("fields {:?}", r.fields));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axle_plugin_host::kinds::router::TagReads;

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_shape_is_exactly_the_declared_parts() {
        let reads = RouteReads {
            tags: TagReads::Keys(vec!["lane".into()]),
            consumer_app: true,
            ..RouteReads::default()
        };
        let tags = owned(&[("trace", "1"), ("lane", "canary")]);
        let shape = |tags, app, method, address| Shape {
            reads: &reads,
            method,
            tags,
            app,
            address,
            fields: Vec::new(),
        };
        let key = shape(&tags, "web", "get", "10.0.0.1").request("s");
        assert_eq!(
            key.tags,
            owned(&[("lane", "canary")]),
            "undeclared keys left out"
        );
        assert_eq!((key.method.as_str(), key.caller_address.as_str()), ("", ""));
        // Undeclared parts (another method, address, tag key) share the memo entry...
        let other = owned(&[("lane", "canary"), ("trace", "2")]);
        assert!(shape(&other, "web", "put", "10.9.9.9").is(&key));
        // ...declared ones do not.
        assert!(!shape(&other, "billing", "get", "10.0.0.1").is(&key));
        let blue = owned(&[("lane", "blue")]);
        assert!(!shape(&blue, "web", "get", "10.0.0.1").is(&key));
        assert!(!shape(&[], "web", "get", "10.0.0.1").is(&key));
    }

    #[test]
    fn fields_are_part_of_the_shape() {
        let reads = RouteReads {
            fields: vec!["user.tier".into()],
            method: true,
            ..RouteReads::default()
        };
        let shape = |tier: &str, method| Shape {
            reads: &reads,
            method,
            tags: &[],
            app: "",
            address: "",
            fields: owned(&[("user.tier", tier)]),
        };
        let key = shape("gold", "get").request("s");
        assert_eq!(key.method, "get");
        assert!(shape("gold", "get").is(&key));
        assert!(!shape("silver", "get").is(&key));
        assert!(!shape("gold", "put").is(&key));
        assert!(describe(&key).contains("user.tier"));
    }
}
