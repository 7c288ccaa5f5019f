//! The health-scorer slot. Safe default: the previous verdict stands.

use wasmtime::component::InstancePre;
use wasmtime::Store;

use crate::plugin::bindings::{health_scorer as b, wit};
use crate::plugin::host_state::HostState;
use crate::plugin::pool::Pool;
use crate::plugin::sandbox::{Instance, Kind};
use crate::plugin::stats::Fault;

pub use b::axle::spi::health::{HealthState, Verdict, WindowStats};

/// Marker for the health-scorer world.
pub struct HealthScorerKind;

impl Kind for HealthScorerKind {
    type Pre = b::HealthScorerPre<HostState>;
    type Bindings = b::HealthScorer;

    fn pre(pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre> {
        b::HealthScorerPre::new(pre)
    }

    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Self::Bindings> {
        pre.instantiate(store)
    }

    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, wit::ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings.call_init(store, config)
    }
}

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
    pub(crate) fn new(instances: Vec<Instance<HealthScorerKind>>) -> Self {
        HealthScorerPlugin {
            pool: Pool::new(instances),
        }
    }

    /// Scores one endpoint's window; `previous` is what stands if the plugin fails.
    pub fn score(&self, stats: &WindowStats, previous: Verdict) -> Scored {
        self.pool.with(|inst| {
            let answer = match inst.ensure(|_, _| Ok(())) {
                Ok(()) => inst.call("score", |b, s| b.call_score(s, *stats)),
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
                        &Fault::Invalid(format!("weight {}‰ is above 1000‰", v.weight_permille)),
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
    }
}
