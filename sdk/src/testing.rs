//! The native test harness: run a plugin's logic without wasm, with a fake host whose
//! clock, facts and randomness the test controls. Each test thread has its own fake host.
//!
//! ```
//! use axle_sdk::testing;
//! testing::set_now_ns(5_000);
//! assert_eq!(axle_sdk::host::now_ns(), 5_000);
//! ```

use axle_spi::{EndpointFacts, EndpointId, LogLevel};
use std::cell::RefCell;
use std::collections::HashMap;

#[derive(Default)]
struct FakeHost {
    now_ns: u64,
    random_state: u64,
    facts: HashMap<EndpointId, EndpointFacts>,
    logs: Vec<(LogLevel, String)>,
}

thread_local! {
    static HOST: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

/// Sets the fake monotonic clock.
pub fn set_now_ns(ns: u64) {
    HOST.with(|h| h.borrow_mut().now_ns = ns);
}

/// Moves the fake clock forward.
pub fn advance_ns(ns: u64) {
    HOST.with(|h| h.borrow_mut().now_ns += ns);
}

/// Sets the facts `host::facts(id)` returns.
pub fn set_facts(id: EndpointId, facts: EndpointFacts) {
    HOST.with(|h| {
        h.borrow_mut().facts.insert(id, facts);
    });
}

/// Forgets every fact, the clock and the logs.
pub fn reset() {
    HOST.with(|h| *h.borrow_mut() = FakeHost::default());
}

/// The lines plugins logged on this thread so far.
pub fn logs() -> Vec<(LogLevel, String)> {
    HOST.with(|h| h.borrow().logs.clone())
}

#[doc(hidden)]
pub mod fake_host {
    use super::*;

    pub fn now_ns() -> u64 {
        HOST.with(|h| h.borrow().now_ns)
    }

    pub fn random() -> u64 {
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            h.random_state = h.random_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            crate::Rng::seeded(h.random_state).next_u64()
        })
    }

    pub fn facts(id: EndpointId) -> Option<EndpointFacts> {
        HOST.with(|h| h.borrow().facts.get(&id).copied())
    }

    pub fn in_flight(id: EndpointId) -> u32 {
        facts(id).map_or(0, |f| f.in_flight)
    }

    pub fn log(level: LogLevel, message: &str) {
        HOST.with(|h| h.borrow_mut().logs.push((level, message.to_string())));
    }
}

/// An endpoint table of `n` endpoints with ids `0..n`, weight 100 and no tags.
pub fn table(n: u32) -> crate::EndpointTable {
    crate::EndpointTable::new(
        1,
        (0..n)
            .map(|id| crate::Endpoint {
                id,
                address: format!("127.0.0.1:{}", 7000 + id),
                weight: 100,
                tags: Vec::new(),
            })
            .collect(),
    )
}

/// A table of one endpoint per weight, ids 0.. in order (addresses as [`table`]'s): for
/// tests of weight-aware selectors.
pub fn weighted_table(weights: &[u32]) -> crate::EndpointTable {
    crate::EndpointTable::new(
        1,
        weights
            .iter()
            .zip(0..)
            .map(|(weight, id)| crate::Endpoint {
                id,
                address: format!("127.0.0.1:{}", 7000 + id),
                weight: *weight,
                tags: Vec::new(),
            })
            .collect(),
    )
}
