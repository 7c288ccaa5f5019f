//! `token-bucket`: one bucket per limit key (service, method, consumer app, consumer IP as
//! the kernel interns them). A bucket holds up to `burst` tokens and refills at `rate` per
//! second; a request takes one token or is rejected with the time until one is back.
//!
//! Config: `rate` [100] and `burst` [= rate] for every key; `service.<name>.rate` and
//! `service.<name>.burst` override them for one service. The kernel keeps one instance of
//! a limiter, so a bucket is never multiplied by the number of worker threads.

use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter};
use std::collections::HashMap;

/// Rate and burst of one bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Limit {
    per_second: f64,
    burst: f64,
}

/// The token-bucket limiter.
pub struct TokenBucket {
    default: Limit,
    per_service: HashMap<String, Limit>,
}

/// One key's bucket.
pub struct Bucket {
    limit: Limit,
    tokens: f64,
    updated_ns: u64,
}

fn limit(config: &Config, prefix: &str, fallback: Option<Limit>) -> Result<Limit, String> {
    let rate_key = format!("{prefix}rate");
    let burst_key = format!("{prefix}burst");
    let per_second = config.f64_or(&rate_key, fallback.map_or(100.0, |l| l.per_second))?;
    if per_second <= 0.0 {
        return Err(format!("key `{rate_key}`: must be greater than 0"));
    }
    let burst = config.f64_or(&burst_key, per_second)?;
    if burst < 1.0 {
        return Err(format!("key `{burst_key}`: must be at least 1"));
    }
    Ok(Limit { per_second, burst })
}

impl Limiter for TokenBucket {
    type KeyState = Bucket;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["rate", "burst", "service.*.rate", "service.*.burst"])?;
        let default = limit(config, "", None)?;
        let mut per_service = HashMap::new();
        for key in config.keys() {
            if let Some(rest) = key.strip_prefix("service.") {
                if let Some((name, _)) = rest.rsplit_once('.') {
                    let l = limit(config, &format!("service.{name}."), Some(default))?;
                    per_service.insert(name.to_string(), l);
                }
            }
        }
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
            tokens: limit.burst,
            updated_ns: host::now_ns(),
        }
    }

    fn acquire(&mut self, key: &mut KeyEntry<Bucket>, permits: u32) -> Admission {
        let b = &mut key.state;
        let now = host::now_ns();
        let elapsed_s = now.saturating_sub(b.updated_ns) as f64 / 1e9;
        b.tokens = (b.tokens + elapsed_s * b.limit.per_second).min(b.limit.burst);
        b.updated_ns = now;
        let want = f64::from(permits.max(1));
        if b.tokens >= want {
            b.tokens -= want;
            Admission::Admit
        } else {
            let wait_s = (want - b.tokens) / b.limit.per_second;
            Admission::Reject {
                retry_after_ms: (wait_s * 1000.0).ceil().min(f64::from(u32::MAX)) as u32,
            }
        }
    }
}

axle_sdk::export_limiter!(TokenBucket);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{testing, ConfigValue, LimiterRuntime};

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
