//! How a plugin's panic reaches the log and ends its instance.
//!
//! Left to Rust's defaults, a panic in a component costs the kernel some 20 µs on the
//! request path, with the plugin's lock held, for two reasons:
//!
//! - the default hook writes its message to an unbuffered stderr piece by piece, each
//!   piece several WASI stream calls into the kernel (about half the cost);
//! - the abort that follows is `unreachable`, a trap the CPU raises and the kernel takes
//!   as a signal.
//!
//! The SDK's hook logs the message as one line through `host.log` (level error, with the
//! plugin's name, in the same budget as its stdout and stderr) and then exits through
//! WASI (`wasi:cli/exit`): the call ends as an error returned from a host call, with no
//! signal. The kernel counts it as a trap either way and replaces the instance
//! (`docs/sandbox.md`, "The faulting call itself").

use std::sync::Once;

use axle_spi::LogLevel;

/// Installs the hook, once per instance; every kind's `init` calls it first, so a panic
/// in the plugin's own `new` is covered too. A plugin that sets a hook of its own in
/// `new` replaces this one.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = info
                .payload_as_str()
                .unwrap_or("(a panic without a message)");
            let line = match info.location() {
                Some(at) => format!("panicked at {at}: {message}"),
                None => format!("panicked: {message}"),
            };
            crate::host::log(LogLevel::Error, &line);
            // WASI 0.2's `exit` carries only success or failure: the kernel sees status 1.
            std::process::exit(101);
        }));
    });
}
