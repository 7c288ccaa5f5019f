//! The server pipeline's stages, one concern per file; `pipeline.rs` runs them in order.

pub mod dedup;
pub mod dispatch;
pub mod intercept;
pub mod intercept_chains;
pub mod limit;
pub mod protect;
pub mod shadow_limit;
