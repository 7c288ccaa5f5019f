//! `sliding-window`: a rate per limit key counted over the last `window-ms`, by two-bucket
//! interpolation: the count of the current fixed window plus the previous window's count
//! weighted by how much of it the sliding window still covers. Unlike a token bucket it
//! has no burst beyond the rate: at most `rate × window` requests in any window (within
//! the interpolation's assumption that the previous window's requests were spread evenly).
//!
//! Config: `rate` [100] requests per second and `window-ms` [1000] for every key;
//! `service.<name>.rate` and `service.<name>.window-ms` override them for one service.
//! `quotas = ["billing=200", "*=50"]` gives consumer applications their own rate (per
//! second, per key): the named app its own, `*` every other app (an app not listed takes
//! `*` if given, else `rate`). Quotas need the kernel to key on the app name (`key-on =
//! ["consumer-app"]`); the manifest refuses `quotas` without it.

mod window;

use axle_limiter_rates::{per_service, rate, DEFAULT_RATE};
use axle_sdk::{host, Admission, Config, KeyEntry, LimitKey, Limiter};
use std::collections::HashMap;
pub use window::Window;

/// Rate and window of one key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    /// Requests per second.
    pub per_second: f64,
    /// The window's length in nanoseconds.
    pub window_ns: u64,
}

impl Limit {
    /// Requests allowed in one window.
    fn per_window(&self) -> f64 {
        self.per_second * self.window_ns as f64 / 1e9
    }
}

/// The sliding-window limiter.
pub struct SlidingWindow {
    default: Limit,
    per_service: HashMap<String, Limit>,
    /// Requests per second by consumer application (`*`: any app not named).
    quotas: HashMap<String, f64>,
}

fn limit(config: &Config, prefix: &str, fallback: Option<Limit>) -> Result<Limit, String> {
    let per_second = rate(
        config,
        prefix,
        fallback.map_or(DEFAULT_RATE, |l| l.per_second),
    )?;
    let window_key = format!("{prefix}window-ms");
    let window_ms = config.u64_or(
        &window_key,
        fallback.map_or(1000, |l| l.window_ns / 1_000_000),
    )?;
    if !(1..=3_600_000).contains(&window_ms) {
        return Err(format!(
            "key `{window_key}`: must be from 1 ms to an hour (got {window_ms})"
        ));
    }
    let l = Limit {
        per_second,
        window_ns: window_ms * 1_000_000,
    };
    check_window(&l, &format!("{prefix}rate"))?;
    Ok(l)
}

/// A window must allow at least one request, or the key would refuse everything.
fn check_window(l: &Limit, what: &str) -> Result<(), String> {
    if l.per_window() < 1.0 {
        return Err(format!(
            "key `{what}`: {} per second over {} ms allows less than one request per window; \
             raise the rate or lengthen window-ms",
            l.per_second,
            l.window_ns / 1_000_000
        ));
    }
    Ok(())
}

/// `quotas`: `app=rate` items; `*` names every app not listed.
fn quotas(config: &Config, default: Limit) -> Result<HashMap<String, f64>, String> {
    let mut out = HashMap::new();
    for item in config.texts("quotas")? {
        let Some((app, rate)) = item.split_once('=') else {
            return Err(format!(
                "key `quotas`: `{item}` is not `app=rate` (e.g. \"billing=200\", \"*=50\")"
            ));
        };
        let app = app.trim();
        if app.is_empty() {
            return Err(format!("key `quotas`: `{item}` names no application"));
        }
        let rate: f64 = rate
            .trim()
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r > 0.0)
            .ok_or_else(|| format!("key `quotas`: `{item}`: the rate must be a number above 0"))?;
        check_window(
            &Limit {
                per_second: rate,
                ..default
            },
            "quotas",
        )?;
        if out.insert(app.to_string(), rate).is_some() {
            return Err(format!("key `quotas`: `{app}` is given twice"));
        }
    }
    Ok(out)
}

impl SlidingWindow {
    /// The limit of a key: its service's (or the default), with the rate its consumer
    /// app's quota gives, if any.
    pub fn limit_of(&self, attributes: &LimitKey) -> Limit {
        let base = *self
            .per_service
            .get(&attributes.service)
            .unwrap_or(&self.default);
        let quota = self
            .quotas
            .get(&attributes.consumer_app)
            .or_else(|| self.quotas.get("*"));
        match quota {
            Some(&per_second) => Limit { per_second, ..base },
            None => base,
        }
    }
}

impl Limiter for SlidingWindow {
    type KeyState = Window;

    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[
            "rate",
            "window-ms",
            "quotas",
            "service.*.rate",
            "service.*.window-ms",
        ])?;
        let default = limit(config, "", None)?;
        let per_service = per_service(config, default, limit)?;
        let quotas = quotas(config, default)?;
        for l in per_service.values() {
            for &per_second in quotas.values() {
                check_window(&Limit { per_second, ..*l }, "quotas")?;
            }
        }
        Ok(SlidingWindow {
            default,
            per_service,
            quotas,
        })
    }

    fn prepare(&mut self, attributes: &LimitKey) -> Window {
        Window::new(self.limit_of(attributes), host::now_ns())
    }

    fn acquire(&mut self, key: &mut KeyEntry<Window>, permits: u32, now_ns: u64) -> Admission {
        match key.state.take(now_ns, permits.max(1)) {
            Ok(()) => Admission::Admit,
            Err(retry_after_ms) => Admission::Reject { retry_after_ms },
        }
    }

    /// Hot-swap handoff: the two windows' counts and where the current one started, so a
    /// new version neither forgets a spent window nor grants it again.
    fn save(&self, w: &Window) -> Option<Vec<u8>> {
        Some(w.save())
    }

    fn restore(&mut self, attributes: &LimitKey, saved: &[u8]) -> Option<Window> {
        let mut w = self.prepare(attributes);
        w.restore(saved, host::now_ns())?;
        Some(w)
    }
}

axle_sdk::export_limiter!(SlidingWindow);

#[cfg(test)]
mod tests;
