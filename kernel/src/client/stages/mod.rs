//! The client pipeline's stages, in the order a call meets them.

pub mod encode;
pub mod feedback;
pub mod route;
pub mod select;
pub mod send;
