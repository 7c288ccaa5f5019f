//! Which cells a run measures, for how long and in how many rounds. The default is
//! today's run (1 KiB at concurrency 1 and 64, a few seconds each, in three rounds);
//! `--sweep` measures every payload × every concurrency, which takes minutes; `--short`
//! is a few corners of the sweep with short runs, for CI, where only "it runs and the
//! numbers are sane" can be asked.

use std::time::Duration;

use super::{Cell, PAYLOAD_BYTES};

/// The payloads a sweep echoes.
pub const SWEEP_PAYLOADS: [usize; 3] = [64, 1024, 16 * 1024];

/// The concurrencies a sweep drives.
pub const SWEEP_CONCURRENCIES: [usize; 4] = [1, 8, 64, 256];

/// Cells and timing of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub payloads: Vec<usize>,
    pub concurrencies: Vec<usize>,
    /// Measured time per system, cell and round.
    pub duration: Duration,
    /// Unmeasured time before each (connections, caches, the allocator).
    pub warm_up: Duration,
    /// Rounds per cell, every system once in each (`rounds.rs` says why).
    pub rounds: usize,
}

/// The rounds of today's run and of a sweep.
pub const ROUNDS: usize = 3;

impl Plan {
    /// Today's run: 1 KiB at concurrency 1 and 64, `duration` per system and cell split
    /// over [`ROUNDS`] rounds.
    pub fn standard(duration: Duration) -> Plan {
        Plan {
            payloads: vec![PAYLOAD_BYTES],
            concurrencies: vec![1, 64],
            duration,
            warm_up: Duration::from_millis(200),
            rounds: 1,
        }
        .in_rounds(ROUNDS)
    }

    /// Every payload × every concurrency.
    pub fn sweep(duration: Duration) -> Plan {
        Plan {
            payloads: SWEEP_PAYLOADS.to_vec(),
            concurrencies: SWEEP_CONCURRENCIES.to_vec(),
            ..Plan::standard(duration)
        }
    }

    /// The sweep's smallest and largest payload at concurrency 1 and 8, a fifth of a
    /// second each in two rounds: every dimension moves, in seconds.
    pub fn short() -> Plan {
        Plan {
            payloads: vec![SWEEP_PAYLOADS[0], SWEEP_PAYLOADS[2]],
            concurrencies: vec![1, 8],
            duration: Duration::from_millis(200),
            warm_up: Duration::from_millis(50),
            rounds: 1,
        }
        .in_rounds(2)
    }

    /// The same measured time per system and cell, split over `rounds` rounds (at least
    /// one).
    pub fn in_rounds(self, rounds: usize) -> Plan {
        let whole = self.duration * self.rounds as u32;
        let rounds = rounds.max(1);
        Plan {
            duration: whole / rounds as u32,
            rounds,
            ..self
        }
    }

    /// (payload, concurrency) of every cell, in the order they run.
    pub fn cells(&self) -> Vec<(usize, usize)> {
        self.payloads
            .iter()
            .flat_map(|&p| self.concurrencies.iter().map(move |&c| (p, c)))
            .collect()
    }

    /// One cell of `system`.
    pub fn cell<'a>(&self, system: &'a str, payload_bytes: usize, concurrency: usize) -> Cell<'a> {
        Cell {
            system,
            payload_bytes,
            concurrency,
            duration: self.duration,
            warm_up: self.warm_up,
        }
    }

    /// The payload ratios are read at: 1 KiB when measured, else the first.
    pub fn ratio_payload(&self) -> usize {
        if self.payloads.contains(&PAYLOAD_BYTES) {
            PAYLOAD_BYTES
        } else {
            self.payloads.first().copied().unwrap_or(PAYLOAD_BYTES)
        }
    }

    /// Seconds the run takes, about (every system runs every cell, once per round).
    pub fn seconds(&self, systems: usize) -> f64 {
        (self.duration + self.warm_up).as_secs_f64()
            * (systems * self.cells().len() * self.rounds) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_split_the_measured_time_and_each_warms_up() {
        let plan = Plan::standard(Duration::from_secs(3));
        assert_eq!((plan.rounds, plan.duration), (3, Duration::from_secs(1)));
        // 2 systems × 2 cells × 3 rounds × (1 s + 0.2 s of warm-up).
        assert!((plan.seconds(2) - 14.4).abs() < 1e-9);
        let one = plan.clone().in_rounds(1);
        assert_eq!((one.rounds, one.duration), (1, Duration::from_secs(3)));
        let zero = plan.in_rounds(0);
        assert_eq!((zero.rounds, zero.duration), (1, Duration::from_secs(3)));
        assert_eq!(Plan::short().rounds, 2);
        assert_eq!(Plan::short().duration, Duration::from_millis(100));
    }
}
