//! The components that ship inside the `axle` binary, built from `plugins/` by this
//! crate's `build.rs` for `wasm32-wasip2`. A manifest names them as `builtin:NAME`.
//!
//! Nothing here depends on the host: the catalog is bytes and names, handed to the plugin
//! host and the manifest's validation.

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

/// The cargo target directory this crate was built in (guest builds sit in its `wasm/`,
/// `xtask` puts the examples in other languages beside them). Only meaningful on the
/// machine that built the binary: `axle bench plugins --languages` and tests use it.
pub fn target_dir() -> &'static str {
    TARGET_DIR
}
