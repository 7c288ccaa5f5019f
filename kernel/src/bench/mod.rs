//! `axle bench plugins`.
