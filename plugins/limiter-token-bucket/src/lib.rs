//! `token-bucket`: one bucket per limit key (service, method, consumer app, consumer IP as
//! the kernel interns them). A bucket holds up to `burst` tokens and refills at `rate` per
//! second; a request takes one token or is rejected with the time until one is back.
//! While a bucket is more than half full it leases the kernel what its rate refills in a
//! lease's millisecond (at most 64): the kernel admits those requests without a call.
//!
//! Config: `rate` [100] and `burst` [= rate] for every key; `service.<name>.rate` and
//! `service.<name>.burst` override them for one service. The kernel keeps one instance of
//! a limiter, so a bucket is never multiplied by the number of worker threads.

use axle_limiter_rates::{limit, per_service, Limit, Tokens};
use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter, LEASE_NS};
use std::collections::HashMap;

/// The most requests one lease admits: one call in 65 costs a request under 2% of a
/// call, and a short lease loses little when its thread moves on to another key.
const MAX_LEASE: u32 = 64;

/// The token-bucket limiter.
pub struct TokenBucket {
    default: Limit,
    per_service: HashMap<String, Limit>,
}

/// One key's bucket.
pub struct Bucket {
    limit: Limit,
    tokens: Tokens,
}

impl Limiter for TokenBucket {
    type KeyState = Bucket;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["rate", "burst", "service.*.rate", "service.*.burst"])?;
        let default = limit(config, "", None)?;
        let per_service = per_service(config, default, limit)?;
        Ok(TokenBucket {
            default,
            per_service,
        })
    }

    fn prepare(&mut self, attributes: &LimitKey) -> Bucket {
        let limit = *self
            .per_service
            .get(&attributes.service)
            .unwrap_or(&self.default);
        Bucket {
            limit,
            tokens: Tokens::full(limit, host::now_ns()),
        }
    }

    fn acquire(&mut self, key: &mut KeyEntry<Bucket>, permits: u32, now_ns: u64) -> Admission {
        let b = &mut key.state;
        b.tokens.take(b.limit, now_ns, permits)
    }

    fn lease(&mut self, key: &mut KeyEntry<Bucket>, _now_ns: u64) -> u32 {
        let b = &mut key.state;
        b.tokens.lease(b.limit, LEASE_NS, MAX_LEASE)
    }

    /// Hot-swap handoff: the tokens left and when they were counted, so a new version
    /// (a new rate, a rebuilt component) neither forgets a drained bucket nor refills it.
    fn save(&self, b: &Bucket) -> Option<Vec<u8>> {
        Some(b.tokens.save())
    }

    fn restore(&mut self, attributes: &LimitKey, saved: &[u8]) -> Option<Bucket> {
        let mut b = self.prepare(attributes);
        // The new version's burst caps what the old one left.
        b.tokens = Tokens::restore(saved, b.limit, b.tokens.updated_ns)?;
        Some(b)
    }
}

axle_sdk::export_limiter!(TokenBucket);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, LimiterRuntime};

    #[test]
    fn hands_its_tokens_to_its_next_version() {
        testing::reset();
        let key = LimitKey {
            service: "echo".into(),
            consumer_ip: "127.0.0.1".into(),
            ..Default::default()
        };
        let config = Config::from_pairs([
            ("rate", ConfigValue::Int(1)),
            ("burst", ConfigValue::Int(5)),
        ]);
        let mut old = LimiterRuntime::<TokenBucket>::new(&config).unwrap();
        old.key_defined(0, key.clone());
        assert_eq!(
            (0..5)
                .filter(|_| old.acquire(0, 1) == Admission::Admit)
                .count(),
            5
        );
        let state = old.export_state();
        let mut new = LimiterRuntime::<TokenBucket>::new(&config).unwrap();
        new.import_state(&state);
        // The kernel may intern keys in another order: the key, not its id, matches.
        new.key_defined(3, key);
        assert!(
            matches!(new.acquire(3, 1), Admission::Reject { .. }),
            "still drained"
        );
        // Garbage is a fresh start, not a trap.
        let mut fresh = LimiterRuntime::<TokenBucket>::new(&config).unwrap();
        fresh.import_state(&[1, 2, 3]);
        fresh.key_defined(0, LimitKey::default());
        assert_eq!(fresh.acquire(0, 1), Admission::Admit);
    }

    #[test]
    fn admits_its_burst_then_its_rate() {
        testing::reset();
        let config = Config::from_pairs([
            ("rate", ConfigValue::Int(10)),
            ("burst", ConfigValue::Int(5)),
            ("service.kv.rate", ConfigValue::Int(1)),
        ]);
        let mut rt = LimiterRuntime::<TokenBucket>::new(&config).unwrap();
        rt.key_defined(
            0,
            LimitKey {
                service: "echo".into(),
                ..Default::default()
            },
        );
        let admitted = (0..20)
            .filter(|_| rt.acquire(0, 1) == Admission::Admit)
            .count();
        assert_eq!(admitted, 5, "the burst");
        assert_eq!(
            rt.acquire(0, 1),
            Admission::Reject {
                retry_after_ms: 100
            }
        );
        // One second later: 10 more (the rate), capped by the burst of 5.
        testing::advance_ns(1_000_000_000);
        assert_eq!(
            (0..20)
                .filter(|_| rt.acquire(0, 1) == Admission::Admit)
                .count(),
            5
        );
        // 300 ms later: 3 tokens.
        testing::advance_ns(300_000_000);
        assert_eq!(
            (0..20)
                .filter(|_| rt.acquire(0, 1) == Admission::Admit)
                .count(),
            3
        );
        // The per-service override: rate 1, burst defaults to the rate.
        rt.key_defined(
            1,
            LimitKey {
                service: "kv".into(),
                ..Default::default()
            },
        );
        assert_eq!(
            (0..20)
                .filter(|_| rt.acquire(1, 1) == Admission::Admit)
                .count(),
            1
        );
    }

    #[test]
    fn leases_only_what_it_can_spare_and_never_more_than_its_tokens() {
        testing::reset();
        let config = Config::from_pairs([
            ("rate", ConfigValue::Int(1_000_000)),
            ("burst", ConfigValue::Int(1000)),
        ]);
        let mut rt = LimiterRuntime::<TokenBucket>::new(&config).unwrap();
        rt.key_defined(0, LimitKey::default());
        let now = host::now_ns();
        // Every admission and every leased request takes a token: 1,000 between them,
        // however the bucket splits them, and the leases stop at half the burst.
        let (mut admitted, mut leased, mut asked) = (0u32, 0u32, 0u32);
        while let (Admission::Admit, lease) = rt.acquire_lease(0, now) {
            asked += 1;
            admitted += 1;
            leased += lease;
            assert!(lease <= MAX_LEASE);
        }
        assert_eq!(admitted + leased, 1000);
        // 999 -> 64 leased, 934 -> 64, ... 544 -> 44 (down to half the burst), then none.
        assert_eq!(leased, 7 * 64 + 44);
        assert_eq!(asked, 8 + 500);
        // A slow rate (under one token a lease) leases nothing.
        let slow = Config::from_pairs([("rate", ConfigValue::Int(500))]);
        let mut rt = LimiterRuntime::<TokenBucket>::new(&slow).unwrap();
        rt.key_defined(0, LimitKey::default());
        assert_eq!(rt.acquire_lease(0, now), (Admission::Admit, 0));
    }

    #[test]
    fn rejects_bad_config_naming_the_key() {
        let config = Config::from_pairs([("service.kv.rate", ConfigValue::Int(0))]);
        let err = LimiterRuntime::<TokenBucket>::new(&config).err().unwrap();
        assert!(err.contains("service.kv.rate"), "{err}");
    }
}
