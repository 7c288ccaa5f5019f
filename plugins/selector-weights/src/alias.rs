//! Walker's alias method (Vose's construction, in integers): after O(n) preparation, a
//! weighted pick costs one random number and one comparison whatever the set size, where a
//! prefix-sum search costs O(log n) cache misses on a large set.

/// A discrete distribution over `0..n`, proportional to the weights it was built from.
#[derive(Clone, Debug)]
pub struct AliasTable {
    /// Per column, what a draw landing in it reads: one entry, so a draw on a large set
    /// misses the cache once, where a share and an alias kept apart missed it twice.
    columns: Vec<Column>,
}

/// One column of the table.
#[derive(Clone, Copy, Debug)]
struct Column {
    /// The share that stays with the column itself, out of 2^32. A full column keeps
    /// `u32::MAX` and aliases itself, so the one height not below it lands on it too.
    keep: u32,
    /// Where the rest of the column goes.
    alias: u32,
}

/// Columns and heights are drawn from 32 random bits each, so a draw is one 64-bit
/// multiply: 128-bit products are a library call in wasm32, and two of them per draw cost
/// a `weighted-random` pick a tenth of an empty component call. A share is then exact to
/// 2^-32, far below what a load balancer can tell.
const HEIGHT: u128 = 1 << 32;

impl AliasTable {
    /// Builds the table. Weights of 0 are never sampled; if every weight is 0 (or there are
    /// none) the table samples uniformly.
    pub fn new(weights: &[u64]) -> Self {
        let n = weights.len() as u64;
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return AliasTable::full((0..weights.len() as u32).collect());
        }
        // Column i holds weight_i * n out of `total * n`; scaled, a column of height `total`
        // is exactly full. Under-full columns borrow the rest from an over-full one.
        let mut scaled: Vec<u128> = weights
            .iter()
            .map(|w| u128::from(*w) * u128::from(n))
            .collect();
        let full = u128::from(total);
        let mut table = AliasTable::full((0..weights.len() as u32).collect());
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..weights.len()).partition(|i| scaled[*i] < full);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            // Under `full`, so under 2^32 once rescaled: the column's kept share, out of
            // `total`, as out of 2^32.
            table.columns[s] = Column {
                keep: (scaled[s] * HEIGHT / full) as u32,
                alias: l as u32,
            };
            scaled[l] -= full - scaled[s];
            if scaled[l] < full {
                large.pop();
                small.push(l);
            }
        }
        table
    }

    /// Every column full, each keeping all of itself: `0..n` drawn uniformly.
    fn full(ids: Vec<u32>) -> Self {
        let columns = ids
            .into_iter()
            .map(|i| Column {
                keep: u32::MAX,
                alias: i,
            })
            .collect();
        AliasTable { columns }
    }

    /// How many entries the table samples from.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the table samples from nothing.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// An index drawn with probability weight / total, from 64 random bits: the high part
    /// picks the column, the remainder the height within it.
    pub fn sample(&self, random: u64) -> usize {
        // A table holds fewer than 2^32 columns (ids are 32 bits), so this cannot overflow.
        let column = (((random >> 32) * self.columns.len() as u64) >> 32) as usize;
        let height = random as u32;
        let c = self.columns[column];
        if height < c.keep {
            column
        } else {
            c.alias as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::Rng;

    fn shares(weights: &[u64], draws: u32) -> Vec<f64> {
        let table = AliasTable::new(weights);
        let mut rng = Rng::seeded(11);
        let mut counts = vec![0u32; weights.len()];
        for _ in 0..draws {
            counts[table.sample(rng.next_u64())] += 1;
        }
        counts
            .iter()
            .map(|c| f64::from(*c) / f64::from(draws))
            .collect()
    }

    #[test]
    fn samples_in_proportion_to_the_weights() {
        let weights = [100, 100, 600, 0, 200];
        let got = shares(&weights, 200_000);
        for (w, share) in weights.iter().zip(&got) {
            let expected = *w as f64 / 1000.0;
            assert!((share - expected).abs() < 0.005, "{got:?}");
        }
        assert_eq!(got[3], 0.0, "a zero weight is never drawn");
    }

    #[test]
    fn all_zero_weights_sample_uniformly() {
        let got = shares(&[0, 0, 0, 0], 40_000);
        assert!(got.iter().all(|s| (s - 0.25).abs() < 0.01), "{got:?}");
    }

    #[test]
    fn every_column_is_full_to_a_unit() {
        // keep[i] + what columns aliasing to i give must add up to weight_i × n, rescaled
        // to columns of height 2^32: exact before rescaling, so within one unit per column
        // after it.
        let weights = [3u64, 1, 7, 0, 5, 5, 2];
        let t = AliasTable::new(&weights);
        let n = weights.len() as u64;
        let total: u64 = weights.iter().sum();
        let mut mass = vec![0u64; weights.len()];
        for (i, c) in t.columns.iter().enumerate() {
            // A full column keeps u32::MAX of 2^32 and gives the last unit to itself.
            mass[i] += u64::from(c.keep);
            mass[c.alias as usize] += HEIGHT as u64 - u64::from(c.keep);
        }
        for (i, w) in weights.iter().enumerate() {
            let expected = (u128::from(w * n) * HEIGHT / u128::from(total)) as u64;
            assert!(
                mass[i].abs_diff(expected) <= n,
                "{i}: {} vs {expected}",
                mass[i]
            );
        }
        assert_eq!(mass[3], 0, "a zero weight gets nothing");
    }
}
