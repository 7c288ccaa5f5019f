//! Service governance: the three-tier settings (`config`), circuit breakers (`breaker`),
//! retry budgets (`budget`), and the provider's concurrency guard and fuse (`guard`).
//! The client and server pipelines call into these; nothing here does I/O.

pub mod breaker;
pub mod budget;
mod config;
pub mod guard;

pub use config::{resolve, Codes, Fallback, Governance, Tier, TierSettings, KEYS};
