//! Progress for work that takes seconds (`axle demo`, `axle bench rpc | plugins`): drawn
//! on stderr when it is a terminal, nothing at all otherwise, so piped output (scripts,
//! the tests) is exactly what it was.

use std::io::IsTerminal;
use std::time::Duration;

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
