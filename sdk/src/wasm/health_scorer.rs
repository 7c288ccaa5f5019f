use crate::kinds::health_scorer::HealthScorer;

world_bindings!(
    "axle:spi/health-scorer",
    "__axle_export_health_scorer",
    "axle_sdk::wasm::health_scorer::bindings"
);

use crate::wasm::base::axle::spi::types as wit;
use crate::HealthState;
use bindings::axle::spi::health;

pub trait Slot {
    type Plugin: HealthScorer;
    fn with<R>(f: impl FnOnce(&mut Option<Self::Plugin>) -> R) -> R;
}

fn state_in(s: health::HealthState) -> HealthState {
    match s {
        health::HealthState::Healthy => HealthState::Healthy,
        health::HealthState::Subhealthy => HealthState::Subhealthy,
        health::HealthState::Dead => HealthState::Dead,
    }
}

fn state_out(s: HealthState) -> health::HealthState {
    match s {
        HealthState::Healthy => health::HealthState::Healthy,
        HealthState::Subhealthy => health::HealthState::Subhealthy,
        HealthState::Dead => health::HealthState::Dead,
    }
}

impl<S: Slot> bindings::Guest for S {
    fn init(config: wit::Config) -> Result<(), String> {
        crate::wasm::install_panic_hook();
        let plugin = S::Plugin::new(&crate::wasm::config(config))?;
        S::with(|slot| *slot = Some(plugin));
        Ok(())
    }

    fn score(stats: health::WindowStats) -> health::Verdict {
        let sdk_stats = crate::WindowStats {
            endpoint: stats.endpoint,
            window_ms: stats.window_ms,
            total: stats.total,
            timeouts: stats.timeouts,
            failures: stats.failures,
            rejected: stats.rejected,
            consecutive_failures: stats.consecutive_failures,
            heartbeat_failures: stats.heartbeat_failures,
            ewma_latency_ns: stats.ewma_latency_ns,
            previous: state_in(stats.previous),
        };
        let verdict = S::with(|slot| slot.as_mut().map(|p| p.score(&sdk_stats)));
        match verdict {
            Some(v) => health::Verdict {
                state: state_out(v.state),
                weight_permille: v.weight_permille,
            },
            None => health::Verdict {
                state: stats.previous,
                weight_permille: 1000,
            },
        }
    }
}
