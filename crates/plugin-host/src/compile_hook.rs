//! Telling a front end that a plugin is being compiled. A compile takes a second or more
//! per plugin, and it happens on a cache miss (a first run, a new plugin, a new kernel
//! version), so a person at a terminal wants to see why the start is slow. The host only
//! reports; how to show it (a spinner, nothing) is the front end's business: this crate
//! is a library, and its output must not change what scripts and tests read.

use std::sync::Arc;
use std::time::Duration;

/// What happened to a plugin's compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompileEvent<'a> {
    /// The cache had no artifact for `plugin`: it is being compiled now.
    Started { plugin: &'a str },
    /// The compile that `Started` announced ended (`ok`: it compiled) after `elapsed`.
    Finished {
        plugin: &'a str,
        ok: bool,
        elapsed: Duration,
    },
}

/// Called on each [`CompileEvent`], on the thread loading the plugin.
pub type CompileHook = Arc<dyn Fn(CompileEvent<'_>) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PluginHost;
    use std::sync::Mutex;

    /// A hook writing down what it was told.
    fn recorder() -> (CompileHook, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let hook: CompileHook = Arc::new(move |e: CompileEvent<'_>| {
            log.lock().unwrap().push(match e {
                CompileEvent::Started { plugin } => format!("started {plugin}"),
                CompileEvent::Finished { plugin, ok, .. } => format!("finished {plugin} {ok}"),
            })
        });
        (hook, seen)
    }

    #[test]
    fn a_compile_is_announced_and_a_cache_hit_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (hook, seen) = recorder();
        let host = PluginHost::new(Some(dir.path().to_path_buf()))
            .unwrap()
            .on_compile(hook);
        host.floor().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            ["started floor", "finished floor true"]
        );

        let (hook, seen) = recorder();
        let warm = PluginHost::new(Some(dir.path().to_path_buf()))
            .unwrap()
            .on_compile(hook);
        warm.floor().unwrap();
        assert!(seen.lock().unwrap().is_empty(), "a cache hit says nothing");
    }
}
