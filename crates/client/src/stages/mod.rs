//! The client pipeline's stages, in the order a call meets them.

pub mod cache;
pub mod count;
pub mod encode;
pub mod fallback;
pub mod feedback;
pub mod intercept;
pub mod retry;
pub mod route;
pub mod route_fields;
pub mod route_memo;
pub mod select;
pub mod send;
pub mod shadow;
