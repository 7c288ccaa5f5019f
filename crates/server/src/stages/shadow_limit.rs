//! SHADOW LIMITER: a candidate limiter (`[slots] shadow-limiter`, `docs/shadow.md`) is
//! asked beside the live one on a sampled share of requests. Its answer is never used:
//! the live limiter alone admits or rejects. It is a plugin of its own (the manifest
//! refuses one that fills a live slot), so it keeps its own keys and tokens, and it hears
//! how the requests it admitted ended exactly as the live one does when it exports
//! `release`. Its faults are its plugin's to count; here a sampled request it gave no
//! answer on counts as a fault. An unsampled request costs one relaxed load (is there a
//! shadow?) and, when there is, one draw from the thread's generator.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use axle_plugin_host::kinds::limiter::{Admission, KeyParts, LimiterPlugin};
use axle_plugin_host::shadow::{unix_ms, Divergence, ShadowCounters, ShadowView};
use axle_plugin_host::{PluginHost, SwapReport};

/// A loaded shadow limiter, the manifest entry it came from, and its counters.
pub struct ShadowLimiter {
    pub plugin: Arc<LimiterPlugin>,
    spec: axle_manifest::PluginSpec,
    digest: [u8; 32],
    pub counters: Arc<ShadowCounters>,
}

/// The pipeline's shadow limiter slot (swapped whole).
#[derive(Default)]
pub struct Slot {
    /// Whether a shadow is set: what an unsampled request reads.
    present: AtomicBool,
    shadow: ArcSwapOption<ShadowLimiter>,
}

impl Slot {
    /// The shadow to ask about this request, when there is one and the request is
    /// sampled.
    #[inline]
    pub fn sampled(&self) -> Option<Arc<ShadowLimiter>> {
        if !self.present.load(Relaxed) {
            return None;
        }
        self.shadow.load_full().filter(|s| s.counters.sample())
    }

    /// What the shadow's decisions came to (none without a shadow).
    pub fn view(&self) -> Option<ShadowView> {
        self.shadow.load().as_ref().map(|s| s.counters.view())
    }

    /// The shadow plugin's counters (faults, quarantine), beside the live plugins'.
    pub fn plugin_counters(&self) -> Option<axle_plugin_host::PluginCounters> {
        self.shadow.load().as_ref().map(|s| s.plugin.counters())
    }

    /// Fills the slot from `manifest` (`[slots] shadow-limiter`, `shadow-sample`): a new
    /// or changed plugin is loaded and self-checked first (`going_live`: traffic flows);
    /// an unchanged one keeps its instance, its state and, while the live limiter and the
    /// rate stay the same, its counters. On an error the running shadow stays.
    pub fn fill(
        &self,
        host: &PluginHost,
        manifest: &axle_manifest::Manifest,
        going_live: bool,
    ) -> anyhow::Result<SwapReport> {
        let running = self.shadow.load_full();
        let wanted = manifest
            .slots
            .shadow_limiter
            .as_ref()
            .and_then(|n| manifest.plugins.get(n));
        let Some(spec) = wanted else {
            self.present.store(false, Relaxed);
            self.shadow.store(None);
            return Ok(SwapReport::default());
        };
        let rate = axle_manifest::shadow::sample(&manifest.slots);
        let live = manifest.slots.limiter.clone().unwrap_or_default();
        let before = running.as_ref().map(|r| (&r.spec, &r.digest));
        let mut report = SwapReport::default();
        let (plugin, digest) = match host.reload_if_changed(spec, before, going_live)? {
            Some(loaded) => {
                let axle_plugin_host::Plugin::Limiter(new) = loaded.plugin else {
                    anyhow::bail!("plugin `{}` is not a limiter", spec.name);
                };
                report.loaded.push(spec.name.clone());
                (new, loaded.report.digest)
            }
            None => match &running {
                Some(r) => {
                    report.kept.push(spec.name.clone());
                    (r.plugin.clone(), r.digest)
                }
                None => anyhow::bail!("plugin `{}`: neither running nor loaded", spec.name),
            },
        };
        let counters = running
            .as_ref()
            .map(|r| r.counters.clone())
            .filter(|c| c.is("limiter", "", &live, &spec.name, rate))
            .unwrap_or_else(|| {
                Arc::new(ShadowCounters::new("limiter", "", &live, &spec.name, rate))
            });
        self.shadow.store(Some(Arc::new(ShadowLimiter {
            plugin,
            spec: spec.clone(),
            digest,
            counters,
        })));
        self.present.store(true, Relaxed);
        Ok(report)
    }
}

/// Asks `shadow` about the request the live limiter answered `live` (`None`: no live
/// limiter, which admits everything), at the same time on the kernel clock as the live
/// one was asked (`at_ns`), so the two decide on the same facts. Returns the key the
/// shadow admitted under, when it is owed the request's end (it exports `release`).
pub fn ask(
    shadow: &ShadowLimiter,
    parts: KeyParts<'_>,
    live: Option<Admission>,
    at_ns: u64,
) -> Option<u32> {
    let (service, method) = (parts.service, parts.method);
    let key = shadow.plugin.key_id_of(parts);
    let answer = shadow.plugin.acquire_at(key, 1, at_ns);
    if !answer.by_plugin {
        shadow.counters.faulted();
        return None;
    }
    let live = live.unwrap_or(Admission::Admit);
    let admits = |a: &Admission| matches!(a, Admission::Admit);
    if admits(&live) == admits(&answer.admission) {
        shadow.counters.agreed();
    } else {
        shadow.counters.diverged(|| Divergence {
            at_unix_ms: unix_ms(),
            live: format!("{} {service}/{method}", verdict(&live)),
            candidate: format!("{} {service}/{method}", verdict(&answer.admission)),
            live_facts: None,
            candidate_facts: None,
        });
    }
    (admits(&answer.admission) && shadow.plugin.wants_release()).then_some(key)
}

/// A limiter's answer for people.
fn verdict(a: &Admission) -> String {
    match a {
        Admission::Admit => "admit".to_string(),
        Admission::Reject { retry_after_ms } => format!("reject (retry after {retry_after_ms} ms)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_read_plainly() {
        assert_eq!(verdict(&Admission::Admit), "admit");
        assert_eq!(
            verdict(&Admission::Reject {
                retry_after_ms: 250
            }),
            "reject (retry after 250 ms)"
        );
    }

    #[test]
    fn an_empty_slot_samples_nothing() {
        let slot = Slot::default();
        assert!(slot.sampled().is_none());
        assert!(slot.view().is_none());
    }
}
