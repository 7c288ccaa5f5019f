//! Progress for work that takes seconds (`axle demo`, `axle bench rpc | plugins`, a
//! plugin's first compile in `axle serve`, `demo` and `plugins check`): drawn
//! on stderr when it is a terminal, nothing at all otherwise, so piped output (scripts,
//! the tests) is exactly what it was.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axle::plugin::{CompileEvent, CompileHook, PluginHost};
use indicatif::{ProgressBar, ProgressStyle};

/// Whether progress is drawn (stderr is a terminal).
fn shown() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `len` steps with `{msg}` beside it; hidden off a terminal.
pub fn bar(len: u64) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("  {elapsed:>4} [{bar:30}] {msg}")
        .expect("a valid template")
        .progress_chars("#>.");
    ProgressBar::new(len).with_style(style)
}

/// A spinner saying `what` and the time so far, ticking on its own; hidden off a
/// terminal. Finish it with `finish_and_clear`.
pub fn spinner(what: String) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template("  {spinner} {msg} ({elapsed})").expect("a valid template");
    let s = ProgressBar::new_spinner()
        .with_style(style)
        .with_message(what);
    s.enable_steady_tick(Duration::from_millis(120));
    s
}

/// A plugin host with the default cache that shows a spinner while a plugin compiles (a
/// cache miss: a first run, a new plugin or kernel version), so a slow first start says
/// why. Off a terminal it is the plain host: nothing is drawn, nothing is even hooked.
pub fn plugin_host() -> anyhow::Result<PluginHost> {
    let host = PluginHost::with_default_cache()?;
    if !shown() {
        return Ok(host);
    }
    let current: Mutex<Option<ProgressBar>> = Mutex::new(None);
    let hook: CompileHook = Arc::new(move |event| {
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            CompileEvent::Started { plugin } => {
                *current = Some(spinner(format!(
                    "compiling plugin {plugin} (once: later starts load it from the cache)"
                )));
            }
            CompileEvent::Finished { .. } => {
                if let Some(s) = current.take() {
                    s.finish_and_clear();
                }
            }
        }
    });
    Ok(host.on_compile(hook))
}
