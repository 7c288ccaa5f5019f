//! One file per plugin kind: its world's bindings, how the kernel calls it, and its safe
//! default when the plugin fails.

pub mod floor;
pub mod health_scorer;
pub mod limiter;
pub mod router;
pub mod selector;
pub mod serializer;
