//! What a two-choice pick reads of an endpoint, kept dense by id apart from the rest of
//! its facts.
//!
//! A pick among 10,000 endpoints reads two at random. In the endpoint's own cell (one
//! `Arc` each, a cache line for the counters and one for the `Arc`'s counts), those two
//! reads missed the caches: 25% of a `p2c-ewma` pick's time at 10,000 endpoints, 2% at 10
//! (`perf record` on `select`). Here the same facts take 32 bytes a slot, in blocks of
//! [`BLOCK`] ids: 320 KiB for 10,000 endpoints, which stays in a core's L2.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axle_core::ewma::AtomicEwma;
use axle_spi::Load;

/// Ids per block: a block is 32 KiB, allocated when its first id is.
pub const BLOCK: usize = 1024;

/// One endpoint's load facts. The three weight parts share one word, so a reader sees
/// them as one writer left them and the effective weight needs no second store.
#[derive(Debug, Default)]
#[repr(C, align(32))]
pub struct LoadSlot {
    in_flight: AtomicU32,
    ewma_latency_ns: AtomicEwma,
    /// Configured weight (low 32 bits), warm-up per mille (next 16), health per mille
    /// (top 16).
    weights: AtomicU64,
}

const WARMUP_SHIFT: u32 = 32;
const HEALTH_SHIFT: u32 = 48;
const PERMILLE_MASK: u64 = 0xffff;

impl LoadSlot {
    /// Starts a life at `weight`, warmed up and healthy, with no latency learnt. Requests
    /// in flight stay counted: an endpoint that left and came back under the same id
    /// still has the calls its earlier cell sent on the wire.
    pub(crate) fn restart(&self, weight: u32) {
        self.weights.store(pack(weight, 1000, 1000), Relaxed);
        self.ewma_latency_ns.reset();
    }

    /// One request more in flight.
    pub(crate) fn started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
    }

    /// One request left flight. Saturating: a finish without a start must not wrap the
    /// counter (one RMW on the common path, a fix-up only if it did go below zero).
    pub(crate) fn ended(&self) {
        if self.in_flight.fetch_sub(1, Relaxed) == 0 {
            let _ = self.in_flight.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn record_latency(&self, latency_ns: u64) {
        self.ewma_latency_ns.record(latency_ns);
    }

    /// Requests sent and not yet answered or abandoned.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// The latency EWMA (0 before the first answer).
    #[inline]
    pub fn ewma_latency_ns(&self) -> u64 {
        self.ewma_latency_ns.get()
    }

    pub(crate) fn set_weight(&self, weight: u32) {
        self.update(|(_, warmup, health)| (weight, warmup, health));
    }

    pub(crate) fn set_warmup_permille(&self, permille: u32) {
        self.update(|(weight, _, health)| (weight, permille.min(1000), health));
    }

    pub(crate) fn set_health_permille(&self, permille: u32) {
        self.update(|(weight, warmup, _)| (weight, warmup, permille.min(1000)));
    }

    fn update(&self, f: impl Fn((u32, u32, u32)) -> (u32, u32, u32)) {
        let _ = self.weights.fetch_update(Relaxed, Relaxed, |w| {
            let (weight, warmup, health) = f(unpack(w));
            Some(pack(weight, warmup, health))
        });
    }

    /// Configured weight × warm-up × health; at least 1 while the configured weight is
    /// not 0, so a ramping endpoint still gets its first calls.
    #[inline]
    pub fn effective_weight(&self) -> u32 {
        let (configured, warmup, health) = unpack(self.weights.load(Relaxed));
        let w = u64::from(configured) * u64::from(warmup) * u64::from(health) / 1_000_000;
        if configured > 0 {
            w.max(1) as u32
        } else {
            0
        }
    }

    /// The three facts a two-choice measure compares.
    #[inline]
    pub fn load(&self) -> Load {
        Load {
            in_flight: self.in_flight(),
            ewma_latency_ns: self.ewma_latency_ns(),
            weight: self.effective_weight(),
        }
    }
}

fn pack(weight: u32, warmup: u32, health: u32) -> u64 {
    u64::from(weight)
        | (u64::from(warmup) & PERMILLE_MASK) << WARMUP_SHIFT
        | (u64::from(health) & PERMILLE_MASK) << HEALTH_SHIFT
}

fn unpack(w: u64) -> (u32, u32, u32) {
    (
        w as u32,
        (w >> WARMUP_SHIFT & PERMILLE_MASK) as u32,
        (w >> HEALTH_SHIFT & PERMILLE_MASK) as u32,
    )
}

/// [`BLOCK`] slots, ids `k * BLOCK ..` of block `k`.
///
/// The slots sit in the block's own allocation, behind the pointer its holders keep (an
/// endpoint's cell, a candidate set's [`Loads`]), so reaching a slot reads no header on
/// the way: a two-choice pick reads its two candidates' slots two steps from the set,
/// where a block holding a box of slots, listed in a `Vec` behind an `Arc`, made it five
/// dependent loads a candidate (`docs/performance.md`, "Two candidates' loads, two steps
/// away"). The `Arc`'s counts, before the slots, are written only when a block is shared
/// or dropped (a table change), never by a call.
#[derive(Debug, Clone)]
pub struct LoadBlock(Arc<[LoadSlot]>);

impl LoadBlock {
    pub(crate) fn new() -> LoadBlock {
        LoadBlock((0..BLOCK).map(|_| LoadSlot::default()).collect())
    }

    /// The slot of the id at `offset` in the block (taken modulo [`BLOCK`]).
    #[inline]
    pub fn slot(&self, offset: usize) -> &LoadSlot {
        &self.0[offset % BLOCK]
    }
}

/// Every block as the table had them at one moment: for a reader that looks up many ids
/// often and is told when the endpoints change (a selector's candidate set). The blocks
/// are listed in a slice of its own, not the table's `Vec`: one step less to a slot.
#[derive(Debug, Clone, Default)]
pub struct Loads(pub(crate) Arc<[Option<LoadBlock>]>);

impl Loads {
    /// Endpoint `id`'s slot, if its block existed then.
    #[inline]
    pub fn slot(&self, id: u32) -> Option<&LoadSlot> {
        let id = id as usize;
        self.0.get(id / BLOCK)?.as_ref().map(|b| b.slot(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_a_half_line_and_a_block_32_kib() {
        assert_eq!(std::mem::size_of::<LoadSlot>(), 32);
        assert_eq!(std::mem::align_of::<LoadSlot>(), 32);
        assert_eq!(
            LoadBlock::new().0.len() * std::mem::size_of::<LoadSlot>(),
            32 << 10
        );
    }

    #[test]
    fn the_weight_parts_are_set_apart_and_read_together() {
        let slot = LoadSlot::default();
        slot.restart(u32::MAX);
        assert_eq!(slot.effective_weight(), u32::MAX);
        slot.set_warmup_permille(500);
        slot.set_health_permille(5_000);
        assert_eq!(slot.effective_weight(), u32::MAX / 2);
        slot.set_health_permille(100);
        slot.set_weight(100);
        assert_eq!(slot.effective_weight(), 5);
        slot.set_warmup_permille(0);
        assert_eq!(slot.effective_weight(), 1, "a ramping endpoint gets a call");
        slot.set_weight(0);
        assert_eq!(slot.effective_weight(), 0);
    }

    #[test]
    fn a_restart_keeps_the_requests_in_flight_and_forgets_the_rest() {
        let slot = LoadSlot::default();
        slot.restart(100);
        slot.started();
        slot.record_latency(8_000);
        slot.set_health_permille(10);
        slot.restart(300);
        assert_eq!(
            slot.load(),
            Load {
                in_flight: 1,
                ewma_latency_ns: 0,
                weight: 300,
            }
        );
        slot.ended();
        slot.ended();
        assert_eq!(slot.in_flight(), 0, "never wraps below zero");
    }
}
