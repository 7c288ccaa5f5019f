//! Where a plugin's stdout and stderr go: the kernel's log, target `plugin`, one event per
//! line with the plugin's name and kind, and never a wait.
//!
//! A line is cut at [`MAX_LINE`] bytes; lines beyond a plugin's budget ([`BURST`] at once,
//! [`PER_SECOND`] after that, shared by all its instances) are dropped and counted, and
//! the next line logged says how many were. A plugin that prints on every call costs a
//! few hundred nanoseconds per line and cannot flood the log or hold a runtime thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line logged, in bytes; the rest of a longer line is cut.
pub const MAX_LINE: usize = 1024;
/// Lines a plugin may log at once.
pub const BURST: f64 = 50.0;
/// Lines a plugin may log per second after its burst.
pub const PER_SECOND: f64 = 10.0;

/// A plugin's log budget and counters, shared by all its instances and both streams.
#[derive(Debug)]
pub struct OutputBudget {
    bucket: Mutex<(f64, Instant)>,
    /// Lines logged.
    pub logged: AtomicU64,
    /// Lines dropped over budget.
    pub dropped: AtomicU64,
    dropped_unreported: AtomicU64,
}

impl Default for OutputBudget {
    fn default() -> Self {
        OutputBudget {
            bucket: Mutex::new((BURST, Instant::now())),
            logged: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_unreported: AtomicU64::new(0),
        }
    }
}

impl OutputBudget {
    /// Takes one line's worth; `Some(n)`: log it, saying `n` lines were dropped before.
    pub(crate) fn take(&self) -> Option<u64> {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * PER_SECOND).min(BURST);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            self.logged.fetch_add(1, Relaxed);
            Some(self.dropped_unreported.swap(0, Relaxed))
        } else {
            self.dropped.fetch_add(1, Relaxed);
            self.dropped_unreported.fetch_add(1, Relaxed);
            None
        }
    }
}

/// Which of a plugin's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A plugin's stdout or stderr (given to its WASI context).
#[derive(Clone)]
pub struct PluginOutput {
    pub plugin: Arc<str>,
    pub kind: &'static str,
    pub stream: Stream,
    /// The plugin's counters, which hold its log budget.
    pub stats: Arc<crate::PluginStats>,
}

impl IsTerminal for PluginOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for PluginOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASIp3 guests use this; Axle links WASIp2. Nothing reaches the log here.
        Box::new(tokio::io::sink())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(LineSink {
            out: self.clone(),
            line: Vec::new(),
            cut: false,
        })
    }
}

/// Collects bytes into lines and logs each complete one.
struct LineSink {
    out: PluginOutput,
    line: Vec<u8>,
    /// The line in progress went past [`MAX_LINE`].
    cut: bool,
}

impl LineSink {
    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, rest, ends) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = MAX_LINE.saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            self.cut |= part.len() > room;
            if ends {
                self.emit();
            }
            bytes = rest;
        }
    }

    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.line);
        let line = line.trim_end_matches('\r');
        // A blank line says nothing and would spend the budget: Rust's panic message,
        // for one, starts with a newline.
        if line.trim().is_empty() {
            self.line.clear();
            self.cut = false;
            return;
        }
        if let Some(dropped) = self.out.stats.output.take() {
            let (plugin, kind, cut) = (&*self.out.plugin, self.out.kind, self.cut);
            match self.out.stream {
                Stream::Stdout => {
                    tracing::info!(target: "plugin", plugin, kind, stream = "stdout", cut, dropped, "{line}")
                }
                Stream::Stderr => {
                    tracing::warn!(target: "plugin", plugin, kind, stream = "stderr", cut, dropped, "{line}")
                }
            }
        }
        self.line.clear();
        self.cut = false;
    }
}

impl OutputStream for LineSink {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        // A line is logged when it ends; a partial one waits for its newline (or the drop).
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for LineSink {
    async fn ready(&mut self) {}
}

impl Drop for LineSink {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink() -> (LineSink, Arc<crate::PluginStats>) {
        let stats = Arc::new(crate::PluginStats::default());
        let out = PluginOutput {
            plugin: "p".into(),
            kind: "selector",
            stream: Stream::Stdout,
            stats: stats.clone(),
        };
        let s = LineSink {
            out,
            line: Vec::new(),
            cut: false,
        };
        (s, stats)
    }

    #[test]
    fn lines_are_split_cut_and_budgeted() {
        let (mut s, stats) = sink();
        let budget = &stats.output;
        s.push(b"one\ntw");
        s.push(b"o\n");
        assert_eq!(budget.logged.load(Relaxed), 2);
        s.push(&vec![b'x'; MAX_LINE * 3]);
        assert_eq!(s.line.len(), MAX_LINE, "a long line is cut, not grown");
        assert!(s.cut);
        s.push(b"\n");
        assert!(!s.cut && s.line.is_empty());
        for _ in 0..1000 {
            s.push(b"flood\n");
        }
        s.push(b"\n \r\n");
        let (logged, dropped) = (budget.logged.load(Relaxed), budget.dropped.load(Relaxed));
        assert_eq!(
            logged + dropped,
            1003,
            "blank lines are neither logged nor dropped"
        );
        assert!(logged <= BURST as u64 + 5, "logged {logged}");
        assert!(dropped >= 900, "dropped {dropped}");
    }
}
