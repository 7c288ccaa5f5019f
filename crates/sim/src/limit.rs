//! The providers' limiter: when the manifest fills the server's `limiter` slot, every
//! simulated provider runs its own instance of it (each provider is its own process in
//! reality, with its own tokens and its own requests in flight), asked the way the
//! server's limit stage asks it: the request keyed by service, method and the consumer
//! identities the limiter's `key-on` names, then `acquire`. A rejection reaches the
//! caller as the `rate_limited` answer a server sends, retry-after included, and the
//! caller's own retry/failover decision applies. A limiter that exports `release` hears
//! of every admitted attempt's end exactly once, with its virtual latency: served, failed,
//! killed, or given up by its caller (then dropped).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use axle_client::CallError;
use axle_manifest::Manifest;
use axle_plugin_host::kinds::limiter::{Admission, KeyParts, LimiterPlugin};
use axle_plugin_host::{Plugin, PluginHost};
use axle_wire::ErrorClass;

use crate::caller::Kernel;
use crate::engine::Engine;

/// Most providers that each get a limiter of their own: every one is a loaded plugin
/// with its own instances, and the instances a process can hold are finite.
pub const MAX_LIMITED: usize = 256;

/// An admission a limiter is owed the end of: its key and when it was admitted (virtual
/// ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub key: u32,
    pub admitted: u64,
}

/// One limiter per provider.
pub struct Limits {
    plugins: Vec<Arc<LimiterPlugin>>,
}

impl Limits {
    /// The limiter the manifest's `[slots] limiter` names, one instance per provider
    /// (`providers` of them), loaded through `host`; `None` when the slot is empty.
    pub fn load(
        host: &PluginHost,
        manifest: &Manifest,
        providers: usize,
    ) -> anyhow::Result<Option<Limits>> {
        let Some(name) = manifest.slots.limiter.as_deref() else {
            return Ok(None);
        };
        let spec = manifest.plugins.get(name).ok_or_else(|| {
            anyhow::anyhow!("the limiter slot names `{name}`, which no [plugins] entry defines")
        })?;
        if providers > MAX_LIMITED {
            // The embedded defaults fill the slot, so a large scenario meets this without
            // asking for a limiter: it runs, without one, and says so.
            tracing::warn!(
                "limiter `{name}` is not simulated: every simulated provider would run its \
                 own instance, and this scenario has {providers} providers (at most \
                 {MAX_LIMITED} with a limiter)"
            );
            return Ok(None);
        }
        let mut plugins = Vec::with_capacity(providers);
        for _ in 0..providers {
            let loaded = host
                .load(spec)
                .map_err(|e| anyhow::anyhow!("limiter `{name}`: {e}"))?;
            match loaded.plugin {
                Plugin::Limiter(l) => plugins.push(l),
                _ => anyhow::bail!("limiter slot: plugin `{name}` is not a limiter"),
            }
        }
        Ok(Some(Limits { plugins }))
    }

    /// Provider `p`'s limiter.
    pub fn plugin(&self, p: usize) -> &Arc<LimiterPlugin> {
        &self.plugins[p]
    }
}

/// The address caller process `caller` calls from, as a provider's limiter sees it:
/// 10.0.0.1 for the first, counting up.
pub fn caller_ip(caller: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0A00_0001u32.wrapping_add(caller as u32)))
}

/// The answer a provider's limiter gives a rejected attempt, as the client reads it.
fn rejected(retry_after_ms: u32) -> CallError {
    CallError::Remote {
        class: ErrorClass::RateLimited,
        message: "rate limited".into(),
        retry_after_ms: Some(retry_after_ms),
        code: None,
    }
}

impl Engine<'_> {
    /// Asks provider `p`'s limiter about attempt `att` of caller `caller` for request
    /// kind `kind`: `true` when it was rejected (and the caller has its answer already).
    /// An admission a limiter wants to hear the end of is held on the attempt.
    pub(crate) fn limit(&mut self, att: u32, p: usize, caller: usize, kind: usize) -> bool {
        let Some(limits) = &self.limits else {
            return false;
        };
        let limiter = limits.plugin(p).clone();
        let key = limiter.key_id_of(KeyParts {
            service: &self.s.service,
            method: &self.s.requests[kind].method,
            consumer_app: "",
            consumer_ip: caller_ip(caller),
        });
        match limiter.acquire(key, 1).admission {
            Admission::Reject { retry_after_ms } => {
                self.rec.rate_limited[p] += 1;
                self.result(att, Err(rejected(retry_after_ms)));
                true
            }
            Admission::Admit => {
                if limiter.wants_release() {
                    let held = Held {
                        key,
                        admitted: self.now,
                    };
                    self.set_held(att, held);
                }
                false
            }
        }
    }

    /// Attempt `att` ended on its provider: its limiter hears it once (`dropped` when it
    /// did not end with the provider's answer to a caller still waiting), with the
    /// virtual time since its admission. Nothing when nothing is held.
    pub(crate) fn release(&mut self, att: u32, dropped: bool) {
        let Some((endpoint, held)) = self.take_held(att) else {
            return;
        };
        if let Some(limits) = &self.limits {
            let p = Kernel::provider_of(endpoint);
            let latency = self.now.saturating_sub(held.admitted);
            limits.plugin(p).release(held.key, 1, latency, dropped);
        }
    }

    fn set_held(&mut self, att: u32, held: Held) {
        self.atts[att as usize].held = Some(held);
    }

    /// The attempt's endpoint and what its limiter is owed, taken: reported once.
    fn take_held(&mut self, att: u32) -> Option<(u32, Held)> {
        let a = &mut self.atts[att as usize];
        a.held.take().map(|held| (a.endpoint, held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_call_from_distinct_addresses() {
        assert_eq!(caller_ip(0).to_string(), "10.0.0.1");
        assert_eq!(caller_ip(255).to_string(), "10.0.1.0");
        assert_ne!(caller_ip(1), caller_ip(2));
    }

    #[test]
    fn a_rejection_reads_as_the_servers_rate_limited_answer() {
        match rejected(250) {
            CallError::Remote {
                class,
                retry_after_ms,
                ..
            } => assert_eq!(
                (class, retry_after_ms),
                (ErrorClass::RateLimited, Some(250))
            ),
            other => panic!("{other:?}"),
        }
    }
}
