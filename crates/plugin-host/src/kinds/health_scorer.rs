//! The health-scorer slot. Safe default: the previous verdict stands.

use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;

pub use axle_spi::{HealthState, Verdict, WindowStats};

crate::kinds::world_kind!(
    HealthScorerKind,
    health_scorer,
    HealthScorer,
    HealthScorerPre,
    "health-scorer world"
);

/// The answer of [`HealthScorerPlugin::score`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scored {
    /// The verdict in force.
    pub verdict: Verdict,
    /// `false` when the plugin failed and the previous verdict stands.
    pub by_plugin: bool,
}

/// A loaded health scorer.
pub struct HealthScorerPlugin {
    pool: Pool<Instance<HealthScorerKind>>,
}

impl HealthScorerPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    pub(crate) fn new(instances: Vec<Instance<HealthScorerKind>>) -> Self {
        let owner = instances[0].pool_owner();
        HealthScorerPlugin {
            pool: Pool::new(instances, owner),
        }
    }

    /// Scores one endpoint's window; `previous` is what stands if the plugin fails.
    pub fn score(&self, stats: &WindowStats, previous: Verdict) -> Scored {
        let stats = crate::convert::window_stats(stats);
        self.pool
            .with(|inst| {
                let answer = match inst.ensure(0, |_, _| Ok(())) {
                    Ok(()) => inst
                        .call("score", |b, s| b.call_score(s, stats))
                        .map(crate::convert::verdict_out),
                    Err(fault) => Err(fault),
                };
                match answer {
                    Ok(v) if v.weight_permille <= 1000 => Scored {
                        verdict: v,
                        by_plugin: true,
                    },
                    Ok(v) => {
                        inst.fault(
                            "score",
                            &Fault::Invalid(format!(
                                "weight {}‰ is above 1000‰",
                                v.weight_permille
                            )),
                        );
                        Scored {
                            verdict: previous,
                            by_plugin: false,
                        }
                    }
                    Err(_) => Scored {
                        verdict: previous,
                        by_plugin: false,
                    },
                }
            })
            .unwrap_or(Scored {
                verdict: previous,
                by_plugin: false,
            })
    }
}
