//! A watched file: providers listed in the manifest's endpoint syntax
//! (`[services.<s>] endpoints = [...]`, a `group` tag for groups), re-read when it
//! changes. Polled rather than inotify-watched: it works the same on every filesystem
//! (bind mounts, config maps replaced by rename) and costs one `stat`-sized read per
//! poll. A file that stops parsing keeps the last good set, with the error reported.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::ParseEndpoints;
use super::{static_list, Backend, Listing, Provider, ServiceKey};

/// A providers file.
pub struct WatchedFile {
    path: PathBuf,
    poll: Duration,
    parse: ParseEndpoints,
}

impl WatchedFile {
    pub fn new(path: PathBuf, poll: Duration, parse: ParseEndpoints) -> WatchedFile {
        WatchedFile { path, poll, parse }
    }
}

/// The instances of `key` in the file's text.
fn read(
    path: &std::path::Path,
    key: &ServiceKey,
    parse: ParseEndpoints,
) -> Result<(String, Vec<Provider>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let base = path.parent().unwrap_or(std::path::Path::new("."));
    let endpoints = parse(&text, &path.display().to_string(), base)?;
    Ok((text, static_list::select(&endpoints, key)))
}

impl Backend for WatchedFile {
    fn describe(&self) -> String {
        format!("file:{}", self.path.display())
    }

    fn subscribe(&self, key: &ServiceKey) -> watch::Receiver<Listing> {
        let (path, poll, key, parse) = (self.path.clone(), self.poll, key.clone(), self.parse);
        // The text the first snapshot came from is the baseline, read before the task
        // runs so a change made right after subscribing is not missed.
        let mut last_text = None;
        let first = match read(&path, &key, parse) {
            Ok((text, instances)) => {
                last_text = Some(text);
                Listing {
                    revision: 1,
                    instances: Arc::new(instances),
                    connected: true,
                    lists: 1,
                    ..Listing::default()
                }
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), "providers file: {e}");
                Listing {
                    error: Some(e),
                    ..Listing::default()
                }
            }
        };
        let (tx, rx) = watch::channel(first);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep(poll) => {}
                }
                let text = std::fs::read_to_string(&path).ok();
                if text == last_text {
                    continue;
                }
                last_text = text;
                match read(&path, &key, parse) {
                    Ok((_, instances)) => tx.send_modify(|s| {
                        s.revision += 1;
                        s.lists += 1;
                        s.instances = Arc::new(instances);
                        s.connected = true;
                        s.error = None;
                    }),
                    Err(e) => {
                        tracing::warn!(file = %path.display(), "providers file (keeping the last good list): {e}");
                        tx.send_modify(|s| {
                            s.connected = false;
                            s.error = Some(e);
                        });
                    }
                }
            }
        });
        rx
    }
}
