//! Per-plugin counters: calls, faults by cause, safe-default answers, replaced instances.
//! Every fault is logged where it happens and counted here, so it shows in `axle plugins
//! check`, `axle bench plugins` and later `axle stats`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a plugin call did not produce a usable answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// The call ran past its deadline and was interrupted.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The instance asked for more memory than its limit.
    #[error("exceeded its memory limit")]
    Memory,
    /// The plugin is in quarantine: the call did not enter it (not counted as a fault).
    #[error("in quarantine")]
    Quarantined,
    /// No instance came free within the plugin's `timeout-ms`.
    #[error("busy: no instance came free within its timeout")]
    Busy,
    /// The guest tried to wait (a sleep, a poll with nothing ready): refused, since a
    /// plugin runs within its call deadline on the kernel's threads.
    #[error("tried to block (a sleep or a wait); plugins may not wait")]
    Blocked,
    /// The guest trapped (a panic, `unreachable`, an out-of-bounds access, ...) or exited.
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest answered something the kind's contract forbids.
    #[error("invalid answer: {0}")]
    Invalid(String),
    /// The instance is being replaced off the request path (not fed to quarantine: the
    /// fault that killed the instance was).
    #[error("its instance is being replaced")]
    Replacing,
    /// No instance could be made (instantiation or `init` failed); retried later.
    #[error("no live instance: {0}")]
    Unavailable(String),
}

/// Counters of one plugin.
#[derive(Debug, Default)]
pub struct PluginStats {
    /// The plugin's name (for log lines about the plugin as a whole).
    pub(crate) name: String,
    /// Whether calls skip the plugin for now (`quarantine.rs`).
    pub(crate) quarantine: crate::quarantine::Quarantine,
    /// The log budget of its stdout, stderr and `host.log`, with lines logged and dropped.
    pub(crate) output: crate::OutputBudget,
    calls: AtomicU64,
    timeouts: AtomicU64,
    memory: AtomicU64,
    blocked: AtomicU64,
    busy: AtomicU64,
    slow: AtomicU64,
    skipped: AtomicU64,
    traps: AtomicU64,
    invalid: AtomicU64,
    unavailable: AtomicU64,
    replacing: AtomicU64,
    replaced: AtomicU64,
    timed: AtomicU64,
    time_ns: AtomicU64,
    /// An interceptor's own counters (`None` for the other kinds).
    pub(crate) intercept: Option<std::sync::Arc<InterceptStats>>,
}

/// What an interceptor decided, beside its calls and faults: the kernel asks it per call
/// and point, and a memoised answer does not enter the plugin, so these differ from
/// [`StatsSnapshot::calls`].
#[derive(Debug, Default)]
pub struct InterceptStats {
    pub(crate) calls: AtomicU64,
    pub(crate) passes: AtomicU64,
    pub(crate) tag_changes: AtomicU64,
    pub(crate) refusals: AtomicU64,
    pub(crate) memo_hits: AtomicU64,
    pub(crate) faults: AtomicU64,
}

/// A copy of an interceptor's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InterceptCounts {
    /// Calls looked at, at the points it declared (memo hits included).
    pub calls: u64,
    /// Calls passed unchanged.
    pub passes: u64,
    /// Calls whose tags it changed.
    pub tag_changes: u64,
    /// Calls it refused (the safe default's refusals included).
    pub refusals: u64,
    /// Answers taken from the memo, without entering the plugin.
    pub memo_hits: u64,
    /// Calls the safe default answered (the plugin failed or answered out of contract).
    pub faults: u64,
}

impl InterceptStats {
    fn snapshot(&self) -> InterceptCounts {
        InterceptCounts {
            calls: self.calls.load(Relaxed),
            passes: self.passes.load(Relaxed),
            tag_changes: self.tag_changes.load(Relaxed),
            refusals: self.refusals.load(Relaxed),
            memo_hits: self.memo_hits.load(Relaxed),
            faults: self.faults.load(Relaxed),
        }
    }
}

/// A copy of a plugin's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    /// Calls made into the plugin.
    pub calls: u64,
    /// Calls interrupted at their deadline.
    pub timeouts: u64,
    /// Calls that hit the memory limit.
    pub memory: u64,
    /// Calls that tried to wait.
    pub blocked: u64,
    /// Calls that found no free instance within the plugin's timeout.
    pub busy: u64,
    /// Calls answered, but slower than the plugin's `slow-call-us` (not faults).
    pub slow: u64,
    /// Calls that trapped.
    pub traps: u64,
    /// Answers that broke the contract.
    pub invalid: u64,
    /// Calls made while no instance could be created.
    pub unavailable: u64,
    /// Calls answered by the safe default while an instance was being replaced.
    pub replacing: u64,
    /// Instances discarded and made anew after a fault.
    pub replaced: u64,
    /// Calls answered by the safe default without entering the plugin, in quarantine.
    pub skipped: u64,
    /// Whether the plugin is in quarantine now.
    pub quarantined: bool,
    /// Times it was put in quarantine.
    pub trips: u64,
    /// Times a probe brought it back.
    pub recoveries: u64,
    /// Lines of its output (stdout, stderr, `host.log`) logged.
    pub log_lines: u64,
    /// Lines of its output dropped over its log budget.
    pub log_dropped: u64,
    /// Calls timed (only a plugin with a `slow-call-us` budget is: two clock reads are a
    /// noticeable share of a ~0.2 µs call) and the time they took, for the time per call.
    #[serde(default)]
    pub timed_calls: u64,
    #[serde(default)]
    pub time_ns: u64,
    /// An interceptor's own counters (absent for the other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercept: Option<InterceptCounts>,
}

impl StatsSnapshot {
    /// Calls answered by the kind's safe default instead of the plugin.
    pub fn faults(&self) -> u64 {
        self.timeouts
            + self.memory
            + self.blocked
            + self.busy
            + self.traps
            + self.invalid
            + self.unavailable
    }
}

impl PluginStats {
    /// Counters for plugin `name`.
    pub fn named(name: &str) -> Self {
        PluginStats {
            name: name.to_string(),
            ..PluginStats::default()
        }
    }

    /// Counters for an interceptor named `name` (with its own decision counters).
    pub fn interceptor(name: &str) -> Self {
        PluginStats {
            name: name.to_string(),
            intercept: Some(std::sync::Arc::default()),
            ..PluginStats::default()
        }
    }

    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Relaxed);
    }

    /// Counts a fault; returns how many of that cause there have been, this one included.
    pub(crate) fn fault(&self, fault: &Fault) -> u64 {
        let counter = match fault {
            Fault::Timeout(_) => &self.timeouts,
            Fault::Memory => &self.memory,
            Fault::Blocked => &self.blocked,
            Fault::Busy => &self.busy,
            Fault::Quarantined => return self.skipped.fetch_add(1, Relaxed) + 1,
            Fault::Trap(_) => &self.traps,
            Fault::Invalid(_) => &self.invalid,
            Fault::Unavailable(_) => &self.unavailable,
            Fault::Replacing => return self.replacing.fetch_add(1, Relaxed) + 1,
        };
        if let crate::quarantine::Tripped::For(ms) = self.quarantine.faulted() {
            tracing::warn!(
                target: "plugin",
                plugin = %self.name,
                fault = %fault,
                cooldown_ms = ms,
                "plugin quarantined: calls get the safe default until a probe succeeds"
            );
        }
        counter.fetch_add(1, Relaxed) + 1
    }

    /// A call answered slower than the plugin's budget; with `quarantine`, it counts
    /// toward quarantine like a fault. Returns how many slow calls there have been.
    pub(crate) fn slow(&self, quarantine: bool) -> u64 {
        if quarantine {
            if let crate::quarantine::Tripped::For(ms) = self.quarantine.faulted() {
                tracing::warn!(
                    target: "plugin",
                    plugin = %self.name,
                    cooldown_ms = ms,
                    "plugin quarantined for slow calls: calls get the safe default until a probe answers in time"
                );
            }
        } else {
            self.succeeded();
        }
        self.slow.fetch_add(1, Relaxed) + 1
    }

    /// A call the plugin answered.
    pub(crate) fn succeeded(&self) {
        if self.quarantine.succeeded() {
            tracing::info!(
                target: "plugin",
                plugin = %self.name,
                "plugin out of quarantine: the probe answered"
            );
        }
    }

    /// A timed call took `ns` (see [`StatsSnapshot::timed_calls`]).
    pub(crate) fn took(&self, ns: u64) {
        self.timed.fetch_add(1, Relaxed);
        self.time_ns.fetch_add(ns, Relaxed);
    }

    /// Counts a replacement; returns how many there have been.
    pub(crate) fn replaced(&self) -> u64 {
        self.replaced.fetch_add(1, Relaxed) + 1
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            calls: self.calls.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            memory: self.memory.load(Relaxed),
            blocked: self.blocked.load(Relaxed),
            busy: self.busy.load(Relaxed),
            slow: self.slow.load(Relaxed),
            traps: self.traps.load(Relaxed),
            invalid: self.invalid.load(Relaxed),
            unavailable: self.unavailable.load(Relaxed),
            replacing: self.replacing.load(Relaxed),
            replaced: self.replaced.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            quarantined: self.quarantine.active(),
            trips: self.quarantine.trips.load(Relaxed),
            recoveries: self.quarantine.recoveries.load(Relaxed),
            log_lines: self.output.logged.load(Relaxed),
            log_dropped: self.output.dropped.load(Relaxed),
            timed_calls: self.timed.load(Relaxed),
            time_ns: self.time_ns.load(Relaxed),
            intercept: self.intercept.as_ref().map(|i| i.snapshot()),
        }
    }
}

/// One plugin's counters under its name (what `axle stats` and the admin endpoint show).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PluginCounters {
    pub name: String,
    #[serde(flatten)]
    pub stats: StatsSnapshot,
}
