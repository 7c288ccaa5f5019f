//! `token-bucket`: one bucket per limit key (service, method, consumer app, consumer IP as
//! the kernel interns them). A bucket holds up to `burst` tokens and refills at `rate` per
//! second; a request takes one token or is rejected with the time until one is back.
//!
//! Config: `rate` [100] and `burst` [= rate] for every key; `service.<name>.rate` and
//! `service.<name>.burst` override them for one service. The kernel keeps one instance of
//! a limiter, so a bucket is never multiplied by the number of worker threads.

use axle_limiter_rates::{limit, per_service, Limit, Tokens};
use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter};
use std::collections::HashMap;

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
    fn rejects_bad_config_naming_the_key() {
        let config = Config::from_pairs([("service.kv.rate", ConfigValue::Int(0))]);
        let err = LimiterRuntime::<TokenBucket>::new(&config).err().unwrap();
        assert!(err.contains("service.kv.rate"), "{err}");
    }
}
