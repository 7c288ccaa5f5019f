//! The components that ship inside the `axle` binary, built from `plugins/` by
//! `kernel/build.rs` for `wasm32-wasip2`. A manifest names them as `builtin:NAME`.

include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// The bytes of builtin component `name`.
pub fn component(name: &str) -> Option<&'static [u8]> {
    BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// Every builtin's name.
pub fn names() -> Vec<&'static str> {
    BUILTINS.iter().map(|(n, _)| *n).collect()
}

/// The floor component of `axle bench plugins` (an empty scalar call).
pub fn floor() -> &'static [u8] {
    FLOOR
}

/// The directory where the build put every guest component, test fixtures included.
/// Only meaningful on the machine that built the binary (tests use it).
pub fn build_dir() -> &'static str {
    BUILD_DIR
}
