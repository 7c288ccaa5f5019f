//! The server pipeline's stages, one concern per file; `pipeline.rs` runs them in order.

pub mod dedup;
pub mod intercept;
pub mod dispatch;
pub mod limit;
pub mod protect;
