//! The hash ring: each member owns virtual nodes (points on a 64-bit circle) in proportion
//! to its weight, and a key belongs to the first point at or after its hash.
//!
//! A member's points depend only on its address and its own weight, so when a member
//! leaves (or joins), only the keys on its own arcs move: about 1/n of them. The ring is
//! built when the kernel defines a set; a lookup goes through a bucket index (the top bits
//! of the hash → the first point of that bucket), about one point per bucket, so a pick
//! costs the same on 10 members as on 10,000.

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

/// A built ring.
#[derive(Debug)]
pub struct Ring {
    /// (hash, owning endpoint) per point, by hash: a lookup reads one cache line.
    points: Vec<(u64, u32)>,
    /// For each bucket (the top `bits` bits of a hash), the first point in or after it.
    buckets: Vec<u32>,
    bits: u32,
}

impl Ring {
    /// Builds the ring of `members` with `per_unit` virtual nodes per [`UNIT_WEIGHT`] of
    /// weight. Members of weight 0 get no points.
    pub fn new(members: &[Member], per_unit: u64) -> Self {
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
                count =
                    (u128::from(count) * u128::from(MAX_POINTS) / u128::from(total)).max(1) as u64;
            }
            let seed = member_seed(m);
            points.extend((0..count).map(|j| (mix(seed ^ j.wrapping_mul(GOLDEN)), m.id)));
        }
        let bits = (points.len().max(1).next_power_of_two().trailing_zeros()).min(24);
        let (points, buckets) = bucket_sort(points, bits);
        Ring {
            points,
            buckets,
            bits,
        }
    }

    /// The endpoint that owns `key`; `None` for a ring with no points.
    pub fn owner(&self, key: u64) -> Option<u32> {
        if self.points.is_empty() {
            return None;
        }
        let h = mix(key);
        let bucket = h.checked_shr(64 - self.bits).unwrap_or(0) as usize;
        let mut i = self.buckets.get(bucket).copied().unwrap_or(0) as usize;
        while i < self.points.len() && self.points[i].0 < h {
            i += 1;
        }
        // Past the last point, the circle wraps to the first.
        let i = if i == self.points.len() { 0 } else { i };
        Some(self.points[i].1)
    }

    /// How many points the ring holds.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the ring has no points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// Sorts the points by hash and returns, per bucket (the top `bits` bits of a hash), the
/// index of its first point. Hashes are uniform, so a counting sort on the top bits
/// leaves about one point per bucket to order: O(n). (Building a ring of 131,072 points
/// took ~5 ms natively with a comparison sort, ~3 ms with this; in wasm, a define-set call
/// must fit its `timeout-ms`, 20 ms by default.)
fn bucket_sort(points: Vec<(u64, u32)>, bits: u32) -> (Vec<(u64, u32)>, Vec<u32>) {
    let bucket_of = |h: u64| h.checked_shr(64 - bits).unwrap_or(0) as usize;
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
    starts.pop();
    (sorted, starts)
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

    fn ring(addresses: &[String], weights: &[u64], per_unit: u64) -> Ring {
        let members: Vec<Member> = addresses
            .iter()
            .zip(weights)
            .enumerate()
            .map(|(i, (a, w))| Member {
                address: a,
                id: i as u32,
                weight: *w,
            })
            .collect();
        Ring::new(&members, per_unit)
    }

    #[test]
    fn points_follow_the_weights_and_the_cap() {
        let a = addresses(3);
        assert_eq!(ring(&a, &[100, 100, 600], 160).len(), 160 + 160 + 960);
        assert_eq!(
            ring(&a, &[1, 0, 100], 160).len(),
            1 + 160,
            "at least one, none for 0"
        );
        let many = addresses(10_000);
        let big = ring(&many, &vec![100; 10_000], 160);
        assert!(
            big.len() as u64 <= MAX_POINTS && big.len() >= 130_000,
            "{}",
            big.len()
        );
        assert!(
            big.points.windows(2).all(|w| w[0] <= w[1]),
            "sorted by hash"
        );
        assert!(ring(&a, &[0, 0, 0], 160).owner(7).is_none());
    }

    #[test]
    fn the_bucket_index_agrees_with_a_plain_search() {
        let a = addresses(50);
        let r = ring(&a, &vec![100; 50], 40);
        for k in 0..20_000u64 {
            let h = mix(k);
            let i = r.points.partition_point(|p| p.0 < h);
            let expected = r.points[if i == r.points.len() { 0 } else { i }].1;
            assert_eq!(r.owner(k), Some(expected), "key {k}");
        }
    }
}
