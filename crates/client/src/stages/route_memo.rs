//! The routes a method policy memoised for one rotation (`stages::route`): kept in the
//! service's `Current` beside the rotation they were made from, appended to while it is
//! current, never changed or removed, and dropped with it. So a call finds its request's
//! shape with plain loads (no `ArcSwap` load, no count) and borrows the members of the
//! route it finds (`docs/performance.md`, "Routes kept with the rotation").

use std::sync::{Mutex, OnceLock, PoisonError};

use axle_spi::RouteRequest;

/// Shapes a chunk holds; a chunk is allocated when the shapes before it fill the last.
const CHUNK: usize = 16;
const CHUNKS: usize = 16;

/// Request shapes remembered per method policy and rotation. Callers choose the values
/// (tags, fields), so the memo is bounded: past this many, routes are computed for each
/// call rather than remembered.
pub const MAX_SHAPES: usize = CHUNK * CHUNKS;

/// A memoised route: the request as the routers were asked (the parts they declared),
/// and the candidate set it led to.
pub struct RouteMemo {
    pub request: RouteRequest,
    pub set: u32,
    /// None: the routers kept the whole rotation, whose member list the call borrows.
    pub members: Option<Box<[u32]>>,
}

/// One policy's memoised routes within one rotation, in the order they came.
#[derive(Default)]
pub struct Shapes {
    /// Filled in order: slot `i` is in chunk `i / CHUNK`. A filled slot never changes.
    chunks: [OnceLock<Box<[OnceLock<RouteMemo>; CHUNK]>>; CHUNKS],
    /// How many slots are filled. Appends take it, so they are serialised and the slots
    /// fill in order (a new shape is rare: once per shape and rotation); reads do not.
    kept: Mutex<usize>,
}

impl Shapes {
    /// The first memo whose request `is` accepts.
    pub fn find(&self, is: impl Fn(&RouteRequest) -> bool) -> Option<&RouteMemo> {
        self.iter().find(|m| is(&m.request))
    }

    /// How many shapes are kept.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Keeps `memo` and answers the one kept: `memo`, or the one another call kept for
    /// the same request first (two calls racing on a new shape both compute it; the
    /// answer is the same). Given back when the memo is full.
    // The memo comes back whole so that its call can use it: a miss, computed by plugin
    // calls, not a path where moving 168 bytes counts.
    #[allow(clippy::result_large_err)]
    pub fn keep(&self, memo: RouteMemo) -> Result<&RouteMemo, RouteMemo> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = self.find(|r| *r == memo.request) {
            return Ok(known);
        }
        if *kept >= MAX_SHAPES {
            return Err(memo);
        }
        let chunk = self.chunks[*kept / CHUNK].get_or_init(Box::default);
        // Empty: only an append, under `kept`, fills a slot, and this is the next one.
        let slot = chunk[*kept % CHUNK].get_or_init(|| memo);
        *kept += 1;
        Ok(slot)
    }

    /// The kept memos in order: up to the first slot not filled yet.
    fn iter(&self) -> impl Iterator<Item = &RouteMemo> {
        self.chunks
            .iter()
            .map_while(OnceLock::get)
            .flat_map(|chunk| chunk.iter())
            .map_while(OnceLock::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(method: &str, set: u32) -> RouteMemo {
        RouteMemo {
            request: RouteRequest {
                service: "s".into(),
                method: method.into(),
                ..RouteRequest::default()
            },
            set,
            members: None,
        }
    }

    #[test]
    fn shapes_are_kept_once_in_order_up_to_the_bound() {
        let shapes = Shapes::default();
        assert!(shapes.find(|_| true).is_none());
        for i in 0..MAX_SHAPES {
            let kept = shapes.keep(memo(&format!("m{i}"), i as u32)).ok();
            assert_eq!(kept.map(|m| m.set), Some(i as u32));
        }
        assert_eq!(shapes.len(), MAX_SHAPES);
        // A known request answers the memo kept first, even past the bound.
        let again = shapes.keep(memo("m17", 999)).ok().map(|m| m.set);
        assert_eq!(again, Some(17));
        let full = shapes.keep(memo("new", 1)).err().map(|m| m.set);
        assert_eq!(full, Some(1), "the memo is given back when full");
        assert_eq!(shapes.len(), MAX_SHAPES);
        let found = shapes.find(|r| r.method == "m200").map(|m| m.set);
        assert_eq!(found, Some(200));
    }

    #[test]
    fn calls_racing_on_shapes_keep_each_once() {
        let shapes = Shapes::default();
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let shapes = &shapes;
                s.spawn(move || {
                    for i in 0..40u32 {
                        let kept = shapes.keep(memo(&format!("m{i}"), t)).ok();
                        assert!(kept.is_some_and(|m| m.request.method == format!("m{i}")));
                        // Every shape kept so far reads whole.
                        assert!(shapes.find(|r| r.method == format!("m{i}")).is_some());
                    }
                });
            }
        });
        assert_eq!(shapes.len(), 40);
    }
}
