//! The hash ring: each member owns virtual nodes (points on a 64-bit circle) in proportion
//! to its weight, and a key belongs to the first point at or after its hash.
//!
//! A member's points depend only on its address and its own weight, so when a member
//! leaves (or joins), only the keys on its own arcs move: about 1/n of them. The ring is
//! built when the kernel defines a set, and then read through a table of owners: the
//! circle cut into slots, one or two per point, each answering for the keys whose hash falls
//! in it with the owner of the first point at or after the slot's start. A pick is one
//! load, whatever the set's size. (A bucket index into the sorted points was two
//! dependent loads, in 2.5 MiB at 10,000 members: `perf record` put a third of a pick's
//! time on those two loads, and the pick cost 1.5× its cost at 10 members.) Keys are
//! placed at the slot's grain, 2^-17 of the circle at the finest: the same rule on a
//! coarser circle, so a member's leaving still moves only the keys it owned.

/// The most points a ring holds: sorting them must stay well inside a call's time budget
/// (`timeout-ms`, 20 ms by default). A set that would need more gets fewer points per
/// member (each member keeps at least one), at the price of a less even split.
pub const MAX_POINTS: u64 = 1 << 17;

/// The weight that gets exactly the configured number of virtual nodes (the kernel's
/// default weight).
const UNIT_WEIGHT: u64 = 100;

/// One member as the ring sees it.
pub struct Member<'a> {
    pub address: &'a str,
    pub id: u32,
    pub weight: u64,
}

/// The most slots a table holds: 512 KiB of owners, one slot a point for a ring at
/// [`MAX_POINTS`]. A slot a point costs the split of keys little: a point's arc is
/// already as long as chance makes it (exponential, its spread as large as its mean), and
/// the grain moves each of its ends by less than a slot. With four slots a point (2 MiB
/// at 10,000 members) a pick at 10,000 members cost 1.1–1.7× its cost at 10, with one
/// 1.0–1.1× (millions of `select`s through the plugin host, best of five rounds, three
/// runs each): the table's cache misses are the difference.
const MAX_SLOT_BITS: u32 = 17;

/// A built ring, as its table of owners.
#[derive(Debug)]
pub struct Ring {
    /// The owner of each slot: slot `s` holds the keys whose hash has `s` in its top
    /// `bits` bits. Empty for a ring with no points.
    owners: Vec<u32>,
    bits: u32,
}

impl Ring {
    /// Builds the ring of `members` with `per_unit` virtual nodes per [`UNIT_WEIGHT`] of
    /// weight. Members of weight 0 get no points.
    pub fn new(members: &[Member], per_unit: u64) -> Self {
        let points = points(members, per_unit);
        let bits = slot_bits(points.len());
        Ring {
            owners: owners(&points, bits),
            bits,
        }
    }

    /// The endpoint that owns `key`; `None` for a ring with no points.
    pub fn owner(&self, key: u64) -> Option<u32> {
        self.owners.get(slot_of(mix(key), self.bits)).copied()
    }
}

/// The points of `members`, `per_unit` per [`UNIT_WEIGHT`] of weight (at least one; none
/// for weight 0), as (hash, owner) sorted.
fn points(members: &[Member], per_unit: u64) -> Vec<(u64, u32)> {
    let wanted = |m: &Member| -> u64 {
        if m.weight == 0 {
            0
        } else {
            (m.weight.saturating_mul(per_unit) / UNIT_WEIGHT).max(1)
        }
    };
    let total: u64 = members.iter().map(wanted).fold(0, u64::saturating_add);
    let mut points: Vec<(u64, u32)> = Vec::with_capacity(total.min(MAX_POINTS) as usize);
    for m in members {
        let mut count = wanted(m);
        if total > MAX_POINTS && count > 0 {
            count = (u128::from(count) * u128::from(MAX_POINTS) / u128::from(total)).max(1) as u64;
        }
        let seed = member_seed(m);
        points.extend((0..count).map(|j| (mix(seed ^ j.wrapping_mul(GOLDEN)), m.id)));
    }
    bucket_sort(points)
}

/// How many bits of a hash name its slot, for a ring of `points` points: at least a slot a
/// point.
fn slot_bits(points: usize) -> u32 {
    points
        .max(2)
        .next_power_of_two()
        .trailing_zeros()
        .min(MAX_SLOT_BITS)
}

/// The slot of hash `h` (its top `bits` bits).
fn slot_of(h: u64, bits: u32) -> usize {
    h.checked_shr(64 - bits).unwrap_or(0) as usize
}

/// Each slot's owner: that of the first point at or after the slot's start, wrapping past
/// the last point to the first. One pass over the slots and the sorted points together.
fn owners(points: &[(u64, u32)], bits: u32) -> Vec<u32> {
    if points.is_empty() {
        return Vec::new();
    }
    let mut next = 0;
    (0..1u64 << bits)
        .map(|slot| {
            let start = slot.checked_shl(64 - bits).unwrap_or(0);
            while next < points.len() && points[next].0 < start {
                next += 1;
            }
            points.get(next).unwrap_or(&points[0]).1
        })
        .collect()
}

/// Sorts the points by hash. Hashes are uniform, so a counting sort on the top bits, as
/// many buckets as points, leaves about one point per bucket to order: O(n). (Building a
/// ring of 131,072 points took ~5 ms natively with a comparison sort, ~3 ms with this; in
/// wasm, a define-set call must fit its `timeout-ms`, 20 ms by default.)
fn bucket_sort(points: Vec<(u64, u32)>) -> Vec<(u64, u32)> {
    let bits = points
        .len()
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(24);
    let bucket_of = |h: u64| slot_of(h, bits);
    // starts[b] = how many points fall in buckets before b.
    let mut starts = vec![0u32; (1usize << bits) + 1];
    for p in &points {
        starts[bucket_of(p.0) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut sorted = vec![(0u64, 0u32); points.len()];
    let mut fill = starts.clone();
    for p in points {
        let b = bucket_of(p.0);
        sorted[fill[b] as usize] = p;
        fill[b] += 1;
    }
    for b in 0..(1usize << bits) {
        sorted[starts[b] as usize..starts[b + 1] as usize].sort_unstable();
    }
    sorted
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finaliser: spreads sequential or clustered inputs over the whole circle.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a member's points come from: its address (stable across tables, restarts and
/// clients, so two callers map a key alike), or its id if the table has no address.
fn member_seed(m: &Member) -> u64 {
    if m.address.is_empty() {
        return mix(u64::from(m.id));
    }
    // FNV-1a over the address, then mixed.
    let fnv = m.address.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    mix(fnv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("10.0.{}.{}:7300", i / 200, i % 200))
            .collect()
    }

    fn members<'a>(addresses: &'a [String], weights: &[u64]) -> Vec<Member<'a>> {
        addresses
            .iter()
            .zip(weights)
            .enumerate()
            .map(|(i, (a, w))| Member {
                address: a,
                id: i as u32,
                weight: *w,
            })
            .collect()
    }

    fn ring(addresses: &[String], weights: &[u64], per_unit: u64) -> Ring {
        Ring::new(&members(addresses, weights), per_unit)
    }

    /// How many points the ring of these members holds.
    fn count(addresses: &[String], weights: &[u64], per_unit: u64) -> usize {
        points(&members(addresses, weights), per_unit).len()
    }

    #[test]
    fn points_follow_the_weights_and_the_cap() {
        let a = addresses(3);
        assert_eq!(count(&a, &[100, 100, 600], 160), 160 + 160 + 960);
        assert_eq!(
            count(&a, &[1, 0, 100], 160),
            1 + 160,
            "at least one, none for 0"
        );
        let many = addresses(10_000);
        let points = count(&many, &vec![100; 10_000], 160);
        assert!(points as u64 <= MAX_POINTS && points >= 130_000, "{points}");
        let big = ring(&many, &vec![100; 10_000], 160);
        assert_eq!(
            big.owners.len(),
            1 << MAX_SLOT_BITS,
            "512 KiB of owners at most"
        );
        assert!(ring(&a, &[0, 0, 0], 160).owner(7).is_none());
    }

    /// The table answers what a search of the sorted points answers for the slot's start.
    #[test]
    fn the_table_agrees_with_a_plain_search() {
        for n in [1, 3, 50, 2_000] {
            let a = addresses(n);
            let members = members(&a, &vec![100; n]);
            let sorted = points(&members, 40);
            assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "sorted by hash");
            let r = Ring::new(&members, 40);
            assert!(
                r.owners.len() >= sorted.len(),
                "{n}: a slot a point at least"
            );
            for k in 0..20_000u64 {
                let start = mix(k) >> (64 - r.bits) << (64 - r.bits);
                let i = sorted.partition_point(|p| p.0 < start);
                let expected = sorted[if i == sorted.len() { 0 } else { i }].1;
                assert_eq!(r.owner(k), Some(expected), "{n} members, key {k}");
            }
        }
    }
}
