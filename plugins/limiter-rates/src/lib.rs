//! What the rate limiters (`token-bucket`, `cluster-rate`, `sliding-window`) share: reading
//! `rate` / `burst` with their `service.<name>.` overrides, a token bucket's refill, and the
//! retry-after a rejection carries. One copy keeps their config keys, error messages and
//! rounding the same, so a manifest moving from one limiter to another reads alike.

mod tokens;

pub use tokens::Tokens;

use axle_sdk::Config;
use std::collections::HashMap;

/// The rate a key gets when the config names none, in requests per second.
pub const DEFAULT_RATE: f64 = 100.0;

/// A rate and the burst a bucket holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    pub per_second: f64,
    pub burst: f64,
}

/// `<prefix>rate` in requests per second, or `fallback` when absent; it must be above 0
/// (a rate of 0 would refuse every request and make every retry-after infinite).
pub fn rate(config: &Config, prefix: &str, fallback: f64) -> Result<f64, String> {
    let rate_key = format!("{prefix}rate");
    let per_second = config.f64_or(&rate_key, fallback)?;
    if per_second <= 0.0 {
        return Err(format!("key `{rate_key}`: must be greater than 0"));
    }
    Ok(per_second)
}

/// `<prefix>rate` and `<prefix>burst`: the rate falls back to `fallback`'s (or
/// [`DEFAULT_RATE`]), the burst to the rate; a burst under 1 could never admit a request.
pub fn limit(config: &Config, prefix: &str, fallback: Option<Limit>) -> Result<Limit, String> {
    let per_second = rate(
        config,
        prefix,
        fallback.map_or(DEFAULT_RATE, |l| l.per_second),
    )?;
    let burst_key = format!("{prefix}burst");
    let burst = config.f64_or(&burst_key, per_second)?;
    if burst < 1.0 {
        return Err(format!("key `{burst_key}`: must be at least 1"));
    }
    Ok(Limit { per_second, burst })
}

/// The services a `service.<name>.<key>` key names, each read by `read` with its
/// `service.<name>.` prefix and `default` to fall back on. A service named by several keys
/// is read once per key, to the same result.
pub fn per_service<L: Copy>(
    config: &Config,
    default: L,
    read: impl Fn(&Config, &str, Option<L>) -> Result<L, String>,
) -> Result<HashMap<String, L>, String> {
    let mut out = HashMap::new();
    for key in config.keys() {
        if let Some(rest) = key.strip_prefix("service.") {
            if let Some((name, _)) = rest.rsplit_once('.') {
                let l = read(config, &format!("service.{name}."), Some(default))?;
                out.insert(name.to_string(), l);
            }
        }
    }
    Ok(out)
}

/// A wait in milliseconds as a rejection's retry-after: rounded up, at least 1 (a
/// rejected caller retrying at once would only be rejected again), at most `u32::MAX`.
pub fn retry_after_ms(wait_ms: f64) -> u32 {
    wait_ms.ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::ConfigValue;

    fn config(pairs: Vec<(&str, ConfigValue)>) -> Config {
        Config::from_pairs(pairs)
    }

    #[test]
    fn the_burst_defaults_to_the_rate_and_the_rate_to_its_fallback() {
        let c = config(vec![("service.kv.burst", ConfigValue::Int(7))]);
        let default = limit(&c, "", None).unwrap();
        assert_eq!(
            default,
            Limit {
                per_second: DEFAULT_RATE,
                burst: DEFAULT_RATE
            }
        );
        let c = config(vec![
            ("rate", ConfigValue::Int(20)),
            ("burst", ConfigValue::Int(5)),
            ("service.kv.burst", ConfigValue::Float(2.5)),
        ]);
        let default = limit(&c, "", None).unwrap();
        assert_eq!(
            default,
            Limit {
                per_second: 20.0,
                burst: 5.0
            }
        );
        let kv = limit(&c, "service.kv.", Some(default)).unwrap();
        assert_eq!(
            kv,
            Limit {
                per_second: 20.0,
                burst: 2.5
            },
            "the service's rate is the default's, its burst its own"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        for (key, value, expect) in [
            (
                "rate",
                ConfigValue::Int(0),
                "key `rate`: must be greater than 0",
            ),
            (
                "rate",
                ConfigValue::Float(-0.5),
                "key `rate`: must be greater than 0",
            ),
            (
                "burst",
                ConfigValue::Float(0.5),
                "key `burst`: must be at least 1",
            ),
            (
                "rate",
                ConfigValue::Text("fast".into()),
                "key `rate`: expected a number",
            ),
        ] {
            let err = limit(&config(vec![(key, value)]), "", None).unwrap_err();
            assert!(err.starts_with(expect), "{key}: {err}");
        }
        let err = rate(
            &config(vec![("service.kv.rate", ConfigValue::Int(-1))]),
            "service.kv.",
            1.0,
        )
        .unwrap_err();
        assert_eq!(err, "key `service.kv.rate`: must be greater than 0");
    }

    #[test]
    fn per_service_reads_each_named_service_with_its_prefix() {
        let c = config(vec![
            ("rate", ConfigValue::Int(10)),
            ("service.kv.rate", ConfigValue::Int(3)),
            ("service.kv.burst", ConfigValue::Int(9)),
            ("service.a.b.rate", ConfigValue::Int(4)),
            ("service.echo.burst", ConfigValue::Int(2)),
        ]);
        let default = limit(&c, "", None).unwrap();
        let services = per_service(&c, default, limit).unwrap();
        assert_eq!(services.len(), 3, "{services:?}");
        assert_eq!(
            services["kv"],
            Limit {
                per_second: 3.0,
                burst: 9.0
            }
        );
        // The last dot ends the name: a service name may hold dots.
        assert_eq!(services["a.b"].per_second, 4.0);
        assert_eq!(
            services["echo"],
            Limit {
                per_second: 10.0,
                burst: 2.0
            }
        );
        // Keys outside `service.` and a `service.` key with no name are not services.
        let c = config(vec![
            ("rate", ConfigValue::Int(1)),
            ("service.x", ConfigValue::Int(1)),
        ]);
        assert!(per_service(&c, default, limit).unwrap().is_empty());
    }

    #[test]
    fn per_service_stops_at_the_first_bad_service() {
        let c = config(vec![("service.kv.burst", ConfigValue::Float(0.1))]);
        let default = limit(&Config::default(), "", None).unwrap();
        let err = per_service(&c, default, limit).unwrap_err();
        assert_eq!(err, "key `service.kv.burst`: must be at least 1");
    }

    #[test]
    fn retry_after_rounds_up_and_stays_in_range() {
        assert_eq!(retry_after_ms(0.0), 1);
        assert_eq!(retry_after_ms(0.001), 1);
        assert_eq!(retry_after_ms(10.0), 10);
        assert_eq!(retry_after_ms(10.2), 11);
        assert_eq!(retry_after_ms(1e12), u32::MAX);
    }
}
