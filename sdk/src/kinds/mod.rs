//! One trait per plugin kind, plus the runtime that keeps pushed tables for it.

pub mod health_scorer;
pub mod interceptor;
pub mod limiter;
pub mod router;
pub mod selector;
pub mod serializer;
