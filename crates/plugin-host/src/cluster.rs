//! How many providers serve each service, as this kernel knows it: the fact a
//! `cluster-limiter` shares a cluster-wide rate out by. The kernel owns it — `axle serve`
//! feeds it from discovery (or the manifest's endpoint lists) — and every limiter loaded
//! by the same host reads it, so a limiter swapped in later hears the current counts too.
//! A version number tells a limiter whether anything changed since it last looked: one
//! atomic load on the request path of a `cluster-limiter`, nothing for any other.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Providers per service, versioned.
#[derive(Debug, Default)]
pub struct ClusterView {
    /// Bumped on every change; 0 while nothing was ever set.
    version: AtomicU64,
    counts: RwLock<BTreeMap<String, u32>>,
}

impl ClusterView {
    /// `service` is served by `providers` providers (0 counts as 1: the kernel that sets
    /// it serves the service itself, so it is at least one). Returns whether it changed.
    pub fn set(&self, service: &str, providers: u32) -> bool {
        let providers = providers.max(1);
        let mut counts = self.counts.write().unwrap_or_else(|e| e.into_inner());
        if counts.get(service) == Some(&providers) {
            return false;
        }
        counts.insert(service.to_string(), providers);
        self.version.fetch_add(1, Ordering::Release);
        true
    }

    /// The version now (compare with what a limiter was last given).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Every count and the version they are consistent with.
    pub fn snapshot(&self) -> (u64, Vec<(String, u32)>) {
        let counts = self.counts.read().unwrap_or_else(|e| e.into_inner());
        let version = self.version();
        let list = counts.iter().map(|(s, n)| (s.clone(), *n)).collect();
        (version, list)
    }

    /// The count of `service` (1 if never set).
    pub fn providers(&self, service: &str) -> u32 {
        let counts = self.counts.read().unwrap_or_else(|e| e.into_inner());
        counts.get(service).copied().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_bumps_the_version_and_a_repeat_does_not() {
        let view = ClusterView::default();
        assert_eq!((view.version(), view.providers("echo")), (0, 1));
        assert!(view.set("echo", 3));
        let v = view.version();
        assert!(v > 0);
        assert!(!view.set("echo", 3), "the same count again");
        assert_eq!(view.version(), v);
        assert!(view.set("kv", 0));
        assert_eq!(view.providers("kv"), 1, "0 counts as this provider");
        let (version, counts) = view.snapshot();
        assert_eq!(version, view.version());
        assert_eq!(counts, [("echo".to_string(), 3), ("kv".to_string(), 1)]);
    }
}
