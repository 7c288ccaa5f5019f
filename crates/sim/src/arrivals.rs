//! When requests arrive (constant, Poisson, bursts; or closed-loop callers, whose next
//! call waits for the previous answer) and what each one is (the request mix: method,
//! tags, hash key).

use crate::rng::Rng;
use crate::scenario::{ArrivalKind, Arrivals, RequestKind};

/// The arrival process.
pub struct ArrivalProcess {
    spec: Arrivals,
    rng: Rng,
    /// Requests made so far.
    pub made: u64,
}

impl ArrivalProcess {
    pub fn new(spec: &Arrivals, rng: Rng) -> ArrivalProcess {
        ArrivalProcess {
            spec: spec.clone(),
            rng,
            made: 0,
        }
    }

    /// The rate (per s) at virtual time `now` (ns).
    fn rate_at(&self, now: u64) -> f64 {
        let a = &self.spec;
        if a.kind != ArrivalKind::Bursts {
            return a.rate_per_s;
        }
        let every = a.burst_every_s.unwrap_or(1.0);
        let length = a.burst_length_s.unwrap_or(0.0);
        let t = now as f64 / 1e9;
        if t % every < length {
            a.burst_rate_per_s.unwrap_or(a.rate_per_s)
        } else {
            a.rate_per_s
        }
    }

    /// Counts a request about to be made; false once `max-requests` were made.
    pub fn admit(&mut self) -> bool {
        if self.spec.max_requests.is_some_and(|m| self.made >= m) {
            return false;
        }
        self.made += 1;
        true
    }

    /// Closed loop: (callers, pause after an answer in ns, at least 1 µs so a caller
    /// whose calls fail at once still lets time pass). `None`: open arrivals.
    pub fn closed(&self) -> Option<(u32, u64)> {
        (self.spec.kind == ArrivalKind::Closed).then(|| {
            let think = (self.spec.think_ms * 1e6) as u64;
            (self.spec.workers.unwrap_or(1), think.max(1_000))
        })
    }

    /// Open arrivals: the next one after one at `now` (ns).
    pub fn next(&mut self, now: u64) -> u64 {
        let rate = self.rate_at(now);
        let gap_s = match self.spec.kind {
            ArrivalKind::Constant => 1.0 / rate,
            ArrivalKind::Poisson | ArrivalKind::Bursts | ArrivalKind::Closed => {
                self.rng.exp(1.0 / rate)
            }
        };
        now + ((gap_s * 1e9) as u64).max(1)
    }
}

/// Draws request kinds by their weights.
pub struct Mix {
    cumulative: Vec<f64>,
    rng: Rng,
}

impl Mix {
    pub fn new(kinds: &[RequestKind], rng: Rng) -> Mix {
        let mut sum = 0.0;
        let cumulative = kinds
            .iter()
            .map(|k| {
                sum += k.weight;
                sum
            })
            .collect();
        Mix { cumulative, rng }
    }

    /// The index of the next request's kind and its hash key.
    pub fn draw(&mut self, kinds: &[RequestKind]) -> (usize, u64) {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = self.rng.f64() * total;
        let i = self
            .cumulative
            .iter()
            .position(|c| x < *c)
            .unwrap_or(kinds.len().saturating_sub(1));
        let key = match kinds.get(i).map_or(0, |k| k.hash_keys) {
            0 => 0,
            n => 1 + self.rng.below(n),
        };
        (i, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ArrivalKind) -> Arrivals {
        Arrivals {
            kind,
            rate_per_s: 100.0,
            max_requests: None,
            workers: None,
            think_ms: 0.0,
            burst_rate_per_s: Some(1000.0),
            burst_every_s: Some(10.0),
            burst_length_s: Some(1.0),
        }
    }

    fn count_in(kind: ArrivalKind, from_s: f64, to_s: f64) -> usize {
        let mut a = ArrivalProcess::new(&spec(kind), Rng::new(5));
        let (mut t, mut n) = (0u64, 0);
        while t < (to_s * 1e9) as u64 {
            if t >= (from_s * 1e9) as u64 {
                n += 1;
            }
            t = a.next(t);
        }
        n
    }

    #[test]
    fn rates_hold() {
        assert_eq!(count_in(ArrivalKind::Constant, 0.0, 10.0), 1000);
        let poisson = count_in(ArrivalKind::Poisson, 0.0, 100.0);
        assert!((9_500..10_500).contains(&poisson), "{poisson}");
        // A burst second carries ten times a quiet second.
        let burst = count_in(ArrivalKind::Bursts, 10.0, 11.0);
        let quiet = count_in(ArrivalKind::Bursts, 12.0, 13.0);
        assert!(burst > 5 * quiet, "{burst} vs {quiet}");
    }

    #[test]
    fn max_requests_stops_arrivals() {
        let mut s = spec(ArrivalKind::Constant);
        s.max_requests = Some(2);
        let mut a = ArrivalProcess::new(&s, Rng::new(1));
        assert!(a.admit() && a.admit());
        assert!(!a.admit());
        assert_eq!(a.closed(), None);
        s.kind = ArrivalKind::Closed;
        s.workers = Some(16);
        assert_eq!(
            ArrivalProcess::new(&s, Rng::new(1)).closed(),
            Some((16, 1_000))
        );
    }

    #[test]
    fn the_mix_follows_weights() {
        let kinds = vec![
            RequestKind {
                weight: 3.0,
                method: "a".into(),
                tags: Default::default(),
                hash_keys: 0,
            },
            RequestKind {
                weight: 1.0,
                method: "b".into(),
                tags: Default::default(),
                hash_keys: 5,
            },
        ];
        let mut m = Mix::new(&kinds, Rng::new(2));
        let draws: Vec<(usize, u64)> = (0..10_000).map(|_| m.draw(&kinds)).collect();
        let b = draws.iter().filter(|(i, _)| *i == 1).count();
        assert!((2_200..2_800).contains(&b), "{b}");
        assert!(draws.iter().all(|(i, k)| if *i == 1 {
            (1..=5).contains(k)
        } else {
            *k == 0
        }));
    }
}
