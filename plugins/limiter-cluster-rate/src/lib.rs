//! `cluster-rate`: a rate meant for a whole service, shared out between its providers.
//! Each provider runs this limiter with the same global `rate` and `burst`; the kernel
//! tells it how many providers serve the service (`providers-changed`, the
//! `cluster-limiter` world: what discovery lists, or without a registry the endpoints the
//! manifest lists, or 1), and each key's token bucket refills at `rate / N` with a burst
//! of `burst / N` (at least 1). With callers spread evenly over the providers the cluster
//! admits about `rate` per key; when a provider joins or leaves, every provider's share
//! follows at its next request.
//!
//! Config: `rate` [100] requests per second for the whole cluster and `burst` [= rate],
//! per key; `service.<name>.rate` and `service.<name>.burst` override them for one
//! service.

pub use axle_limiter_rates::Limit;
use axle_limiter_rates::{limit, per_service, Tokens};
use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter};
use std::collections::HashMap;

/// The cluster-rate limiter.
pub struct ClusterRate {
    default: Limit,
    per_service: HashMap<String, Limit>,
    /// Providers per service, as the kernel last said (1 when it never said).
    providers: HashMap<String, u32>,
    /// Bumped whenever a count changes: a key with an older one recomputes its share.
    generation: u64,
}

/// One key's bucket, holding this provider's share of the global limit.
pub struct Bucket {
    global: Limit,
    share: Limit,
    generation: u64,
    tokens: Tokens,
}

impl ClusterRate {
    /// This provider's share of `global` when `n` providers serve the service.
    pub fn share(global: Limit, n: u32) -> Limit {
        let n = f64::from(n.max(1));
        Limit {
            per_second: global.per_second / n,
            burst: (global.burst / n).max(1.0),
        }
    }

    fn refresh(&self, service: &str, b: &mut Bucket) {
        if b.generation == self.generation {
            return;
        }
        let n = self.providers.get(service).copied().unwrap_or(1);
        b.share = ClusterRate::share(b.global, n);
        b.tokens.tokens = b.tokens.tokens.min(b.share.burst);
        b.generation = self.generation;
    }
}

impl Limiter for ClusterRate {
    type KeyState = Bucket;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["rate", "burst", "service.*.rate", "service.*.burst"])?;
        let default = limit(config, "", None)?;
        let per_service = per_service(config, default, limit)?;
        Ok(ClusterRate {
            default,
            per_service,
            providers: HashMap::new(),
            generation: 1,
        })
    }

    fn prepare(&mut self, attributes: &LimitKey) -> Bucket {
        let global = *self
            .per_service
            .get(&attributes.service)
            .unwrap_or(&self.default);
        let n = self
            .providers
            .get(&attributes.service)
            .copied()
            .unwrap_or(1);
        let share = ClusterRate::share(global, n);
        Bucket {
            global,
            share,
            generation: self.generation,
            tokens: Tokens::full(share, host::now_ns()),
        }
    }

    fn acquire(&mut self, key: &mut KeyEntry<Bucket>, permits: u32, now_ns: u64) -> Admission {
        self.refresh(&key.attributes.service, &mut key.state);
        let b = &mut key.state;
        b.tokens.take(b.share, now_ns, permits)
    }

    fn providers_changed(&mut self, service: &str, providers: u32) {
        let providers = providers.max(1);
        if self.providers.insert(service.to_string(), providers) != Some(providers) {
            self.generation += 1;
        }
    }

    /// Hot-swap handoff: the tokens left and when they were counted.
    fn save(&self, b: &Bucket) -> Option<Vec<u8>> {
        Some(b.tokens.save())
    }

    fn restore(&mut self, attributes: &LimitKey, saved: &[u8]) -> Option<Bucket> {
        let mut b = self.prepare(attributes);
        b.tokens = Tokens::restore(saved, b.share, b.tokens.updated_ns)?;
        Some(b)
    }
}

axle_sdk::export_limiter!(ClusterRate);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, LimiterRuntime};

    fn key(service: &str) -> LimitKey {
        LimitKey {
            service: service.into(),
            ..Default::default()
        }
    }

    fn admitted(rt: &mut LimiterRuntime<ClusterRate>, key: u32) -> usize {
        (0..10_000)
            .filter(|_| rt.acquire(key, 1) == Admission::Admit)
            .count()
    }

    #[test]
    fn each_provider_takes_its_share_of_the_global_rate() {
        testing::reset();
        let config = Config::from_pairs([
            ("rate", ConfigValue::Int(300)),
            ("burst", ConfigValue::Int(30)),
            ("service.kv.rate", ConfigValue::Int(10)),
        ]);
        let mut rt = LimiterRuntime::<ClusterRate>::new(&config).unwrap();
        rt.providers_changed("echo", 3);
        rt.key_defined(0, key("echo"));
        assert_eq!(admitted(&mut rt, 0), 10, "a third of the burst");
        testing::advance_ns(1_000_000_000);
        assert_eq!(
            admitted(&mut rt, 0),
            10,
            "a third of 300/s, capped by the burst"
        );
        testing::advance_ns(100_000_000);
        assert_eq!(admitted(&mut rt, 0), 10, "100 ms at 100/s");
        assert_eq!(rt.acquire(0, 1), Admission::Reject { retry_after_ms: 10 });
        // A provider leaves: two share it, each 150/s, burst 15.
        rt.providers_changed("echo", 2);
        testing::advance_ns(100_000_000);
        assert_eq!(admitted(&mut rt, 0), 15);
        // A service never told is one provider: the whole rate (kv: 10/s, burst 10).
        rt.key_defined(1, key("kv"));
        assert_eq!(admitted(&mut rt, 1), 10);
        // 0 providers is this one.
        rt.providers_changed("kv", 0);
        testing::advance_ns(1_000_000_000);
        assert_eq!(admitted(&mut rt, 1), 10);
    }

    #[test]
    fn a_share_keeps_at_least_one_request_of_burst() {
        let share = ClusterRate::share(
            Limit {
                per_second: 5.0,
                burst: 5.0,
            },
            10,
        );
        assert_eq!(share.per_second, 0.5);
        assert_eq!(share.burst, 1.0);
    }

    #[test]
    fn rejects_bad_config_naming_the_key() {
        for (k, v) in [
            ("rate", ConfigValue::Int(0)),
            ("burst", ConfigValue::Float(0.5)),
            ("service.kv.rate", ConfigValue::Int(-1)),
            ("window-ms", ConfigValue::Int(5)),
        ] {
            let err = LimiterRuntime::<ClusterRate>::new(&Config::from_pairs([(k, v)]))
                .err()
                .unwrap();
            assert!(err.contains(k), "{k}: {err}");
        }
    }
}
