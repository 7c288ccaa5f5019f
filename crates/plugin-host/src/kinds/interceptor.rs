//! The interceptor slot: a filter that looks at a call before and after it runs, on the
//! caller and on the provider. Safe default when the plugin fails (trap, timeout, busy,
//! quarantine, an invalid answer): pass, or refuse with class `internal`, as the
//! manifest's `on-error` says (`pass` unless told otherwise: a broken filter must not
//! become an outage; `refuse` where letting a call through unchecked is worse).
//!
//! The plugin declares once (after `init`, and again after every instance rebuild) where
//! it runs and which parts of a call it reads; only those parts are filled. When none of
//! them changes per call ([`InterceptReads::per_call`]), its answers are memoised per
//! point, service, method and the values of the parts read, in a bounded table (see
//! [`MEMO_MAX`]), so it runs once per request shape.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::bindings::interceptor as b;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::{Fault, InterceptStats};

use super::intercept_contract::{check_grant, check_verdict, declaration, point_out};
pub use super::intercept_contract::{
    refusal_class, MAX_MESSAGE, MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE, REFUSAL_CLASSES,
};

use b::axle::spi::interception as wi;

pub use axle_spi::{
    InterceptDeclaration, InterceptPoint, InterceptReads, InterceptVerdict, Refusal,
};

crate::kinds::world_kind!(
    InterceptorKind,
    interceptor,
    Interceptor,
    InterceptorPre,
    "interceptor world"
);

/// Most memoised answers per interceptor. Callers choose consumer names and tags, so
/// the table must not grow with what they send: once full, calls of a new shape run the
/// plugin without being remembered (the shapes already known keep their answers).
pub const MEMO_MAX: usize = 4096;
/// The class of a refusal the safe default makes (`on-error = "refuse"`).
pub const ON_ERROR_CLASS: &str = "internal";

/// One call at one point, borrowed from the stage that asks (nothing is copied unless
/// the plugin is entered, and then only the parts it declared).
#[derive(Clone, Copy, Debug)]
pub struct CallView<'a> {
    pub point: InterceptPoint,
    pub service: &'a str,
    pub method: &'a str,
    pub tags: &'a [(String, String)],
    pub consumer_app: &'a str,
    /// The caller's IP (provider side).
    pub peer: Option<IpAddr>,
    pub traceparent: &'a str,
    pub deadline_left_us: u64,
    pub payload: &'a [u8],
    /// At the after points: "" for a success, else the error class's name.
    pub outcome: &'a str,
}

impl<'a> CallView<'a> {
    /// A call at `point` with every other part empty.
    pub fn new(point: InterceptPoint, service: &'a str, method: &'a str) -> Self {
        CallView {
            point,
            service,
            method,
            tags: &[],
            consumer_app: "",
            peer: None,
            traceparent: "",
            deadline_left_us: 0,
            payload: &[],
            outcome: "",
        }
    }
}

/// The answer of [`InterceptorPlugin::intercept`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intercepted {
    /// Pass, new tags (before points only) or a refusal (its class in snake case, one
    /// of [`REFUSAL_CLASSES`]).
    pub verdict: InterceptVerdict,
    /// `false` when the plugin failed and `on-error` decided.
    pub by_plugin: bool,
}

struct Member {
    inst: Instance<InterceptorKind>,
}

/// A memoised answer's key: the call's shape with only the parts the plugin reads.
/// Compared only through [`MemoKey::matches`] (no `PartialEq`: `==` is what was slow).
struct MemoKey {
    point: InterceptPoint,
    service: Box<str>,
    method: Box<str>,
    tags: Vec<(String, String)>,
    consumer_app: Box<str>,
    peer: Option<IpAddr>,
    outcome: Box<str>,
}

impl MemoKey {
    /// The parts the plugin does not read are empty: compared with
    /// [`axle_core::text::same`], not `==`.
    fn matches(&self, c: &CallView<'_>) -> bool {
        use axle_core::text::same;
        self.point == c.point
            && self.peer == c.peer
            && same(&self.service, c.service)
            && same(&self.method, c.method)
            && same(&self.consumer_app, c.consumer_app)
            && same(&self.outcome, c.outcome)
            && self.tags.len() == c.tags.len()
            && self
                .tags
                .iter()
                .zip(c.tags)
                .all(|((k, v), (ck, cv))| same(k, ck) && same(v, cv))
    }
}

type Memo = rustc_hash::FxHashMap<u64, Vec<(MemoKey, InterceptVerdict)>>;

/// A loaded interceptor.
pub struct InterceptorPlugin {
    pool: Pool<Member>,
    name: Arc<str>,
    declaration: RwLock<InterceptDeclaration>,
    /// Whether the manifest entry grants the payload (`grant-payload`).
    payload_granted: bool,
    on_error_pass: bool,
    memo: RwLock<Memo>,
    memo_len: AtomicUsize,
    /// Bumped when the memo is cleared, so an answer computed before is not stored after.
    epoch: AtomicU64,
    counts: Arc<InterceptStats>,
}

impl InterceptorPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines, and the
    /// interceptor's own: passes, tag changes, refusals, memo hits).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    /// Asks the first instance for its declaration and checks it against the grant.
    pub(crate) fn new(
        mut instances: Vec<Instance<InterceptorKind>>,
        payload_granted: bool,
        on_error_pass: bool,
        counts: Arc<InterceptStats>,
    ) -> Result<Self, String> {
        let declared = instances[0]
            .call("declare", |b, s| b.call_declare(s))
            .map_err(|f| format!("`declare` failed: {f}"))?;
        let declaration = declaration(&declared);
        check_grant(&declaration, payload_granted)?;
        let owner = instances[0].pool_owner();
        let name = owner.name.clone();
        Ok(InterceptorPlugin {
            pool: Pool::new(
                instances.drain(..).map(|inst| Member { inst }).collect(),
                owner,
            ),
            name,
            declaration: RwLock::new(declaration),
            payload_granted,
            on_error_pass,
            memo: RwLock::new(Memo::default()),
            memo_len: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            counts,
        })
    }

    /// The plugin's manifest name (what a refusal names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the plugin declared (points and parts read).
    pub fn declaration(&self) -> InterceptDeclaration {
        self.declaration.read().clone()
    }

    /// Whether the plugin runs at `point` (a stage skips it, uncounted, elsewhere).
    pub fn runs_at(&self, point: InterceptPoint) -> bool {
        self.declaration.read().points.contains(&point)
    }

    /// How many answers are memoised now (at most [`MEMO_MAX`]).
    pub fn memo_len(&self) -> usize {
        self.memo_len.load(Relaxed)
    }

    /// Looks at one call. A point the plugin did not declare passes without entering it.
    pub fn intercept(&self, call: &CallView<'_>) -> Intercepted {
        let reads = {
            let d = self.declaration.read();
            if !d.points.contains(&call.point) {
                return Intercepted {
                    verdict: InterceptVerdict::Pass,
                    by_plugin: true,
                };
            }
            d.reads
        };
        self.counts.calls.fetch_add(1, Relaxed);
        let view = masked(call, &reads);
        let memoise = !reads.per_call();
        let hash = memoise.then(|| hash_of(&view));
        if let Some(hash) = hash {
            if let Some(verdict) = self.memo_get(hash, &view) {
                self.counts.memo_hits.fetch_add(1, Relaxed);
                return self.counted(Intercepted {
                    verdict,
                    by_plugin: true,
                });
            }
        }
        let epoch = self.epoch.load(Relaxed);
        let answer = self.ask(&view, &reads);
        if let (Some(hash), true) = (hash, answer.by_plugin) {
            self.memo_put(hash, &view, &answer.verdict, epoch);
        }
        self.counted(answer)
    }

    fn counted(&self, answer: Intercepted) -> Intercepted {
        let c = &self.counts;
        if !answer.by_plugin {
            c.faults.fetch_add(1, Relaxed);
        }
        match &answer.verdict {
            InterceptVerdict::Pass => c.passes.fetch_add(1, Relaxed),
            InterceptVerdict::SetTags(_) => c.tag_changes.fetch_add(1, Relaxed),
            InterceptVerdict::Refuse(_) => c.refusals.fetch_add(1, Relaxed),
        };
        answer
    }

    /// Enters the plugin (re-declaring first on a rebuilt instance) and checks its answer.
    fn ask(&self, view: &CallView<'_>, reads: &InterceptReads) -> Intercepted {
        let answer = self.pool.with(|member| {
            if !member.inst.is_live() {
                member.inst.ensure(0, |_, _| Ok(()))?;
                self.redeclare(member)?;
            }
            let call = wit_call(view, reads, self.payload_granted);
            let verdict = member
                .inst
                .call("intercept", |b, s| b.call_intercept(s, &call))?;
            check_verdict(view.point, verdict).map_err(|why| {
                let fault = Fault::Invalid(why);
                member.inst.fault("intercept", &fault);
                fault
            })
        });
        match answer.and_then(|a| a) {
            Ok(verdict) => Intercepted {
                verdict,
                by_plugin: true,
            },
            Err(_) => self.safe_default(),
        }
    }

    /// A rebuilt instance declares again; a changed declaration replaces the kept one
    /// and clears the memo. One that now asks for an ungranted payload is an invalid
    /// answer: the instance is not used (the old declaration stays).
    fn redeclare(&self, member: &mut Member) -> Result<(), Fault> {
        let declared = member.inst.call("declare", |b, s| b.call_declare(s))?;
        let declared = declaration(&declared);
        if let Err(why) = check_grant(&declared, self.payload_granted) {
            let fault = Fault::Invalid(why);
            member.inst.fault("declare", &fault);
            return Err(fault);
        }
        let mut kept = self.declaration.write();
        if *kept != declared {
            tracing::info!(plugin = %self.name, "interceptor declared anew after a rebuild");
            *kept = declared;
        }
        drop(kept);
        self.clear_memo();
        Ok(())
    }

    /// Forgets every memoised answer (a rebuilt instance may answer differently).
    pub fn clear_memo(&self) {
        let mut memo = self.memo.write();
        self.epoch.fetch_add(1, Relaxed);
        memo.clear();
        self.memo_len.store(0, Relaxed);
    }

    fn safe_default(&self) -> Intercepted {
        Intercepted {
            verdict: if self.on_error_pass {
                InterceptVerdict::Pass
            } else {
                InterceptVerdict::Refuse(Refusal {
                    class: ON_ERROR_CLASS.into(),
                    message: format!("interceptor `{}` failed", self.name),
                })
            },
            by_plugin: false,
        }
    }

    fn memo_get(&self, hash: u64, view: &CallView<'_>) -> Option<InterceptVerdict> {
        self.memo
            .read()
            .get(&hash)?
            .iter()
            .find(|(k, _)| k.matches(view))
            .map(|(_, v)| v.clone())
    }

    fn memo_put(&self, hash: u64, view: &CallView<'_>, verdict: &InterceptVerdict, epoch: u64) {
        if self.memo_len.load(Relaxed) >= MEMO_MAX {
            return;
        }
        let mut memo = self.memo.write();
        if self.epoch.load(Relaxed) != epoch || self.memo_len.load(Relaxed) >= MEMO_MAX {
            return;
        }
        let bucket = memo.entry(hash).or_default();
        if bucket.iter().any(|(k, _)| k.matches(view)) {
            return;
        }
        bucket.push((
            MemoKey {
                point: view.point,
                service: view.service.into(),
                method: view.method.into(),
                tags: view.tags.to_vec(),
                consumer_app: view.consumer_app.into(),
                peer: view.peer,
                outcome: view.outcome.into(),
            },
            verdict.clone(),
        ));
        self.memo_len.fetch_add(1, Relaxed);
    }
}

/// The call with the parts the plugin does not read emptied (what it sees, and what a
/// memoised answer is keyed by).
fn masked<'a>(c: &CallView<'a>, r: &InterceptReads) -> CallView<'a> {
    CallView {
        point: c.point,
        service: c.service,
        method: c.method,
        tags: if r.tags { c.tags } else { &[] },
        consumer_app: if r.consumer { c.consumer_app } else { "" },
        peer: if r.peer { c.peer } else { None },
        traceparent: if r.trace { c.traceparent } else { "" },
        deadline_left_us: if r.deadline { c.deadline_left_us } else { 0 },
        payload: if r.payload { c.payload } else { &[] },
        outcome: if r.outcome && !c.point.is_before() {
            c.outcome
        } else {
            ""
        },
    }
}

fn hash_of(c: &CallView<'_>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    c.point.hash(&mut h);
    c.service.hash(&mut h);
    c.method.hash(&mut h);
    c.tags.hash(&mut h);
    c.consumer_app.hash(&mut h);
    c.peer.hash(&mut h);
    c.outcome.hash(&mut h);
    h.finish()
}

fn wit_call(c: &CallView<'_>, r: &InterceptReads, granted: bool) -> wi::Call {
    wi::Call {
        point: point_out(c.point),
        service: c.service.to_string(),
        method: c.method.to_string(),
        tags: c.tags.to_vec(),
        consumer_app: c.consumer_app.to_string(),
        peer: c.peer.map(|ip| ip.to_string()).unwrap_or_default(),
        traceparent: c.traceparent.to_string(),
        deadline_left_us: c.deadline_left_us,
        payload_size: if r.payload_size || r.payload {
            c.payload.len().min(u32::MAX as usize) as u32
        } else {
            0
        },
        payload: (r.payload && granted).then(|| c.payload.to_vec()),
        outcome: c.outcome.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_declared_parts_reach_the_plugin_and_the_memo_key() {
        let tags = vec![("lane".to_string(), "a".to_string())];
        let call = CallView {
            tags: &tags,
            consumer_app: "app",
            peer: Some(IpAddr::from([127, 0, 0, 1])),
            traceparent: "00-ab",
            deadline_left_us: 9,
            payload: b"body",
            outcome: "business",
            ..CallView::new(InterceptPoint::ServerAfter, "s", "m")
        };
        let reads = InterceptReads {
            consumer: true,
            ..InterceptReads::default()
        };
        let m = masked(&call, &reads);
        assert_eq!((m.consumer_app, m.tags.len(), m.peer), ("app", 0, None));
        assert_eq!((m.traceparent, m.deadline_left_us, m.outcome), ("", 0, ""));
        let other_trace = CallView {
            traceparent: "00-cd",
            ..call
        };
        assert_eq!(hash_of(&m), hash_of(&masked(&other_trace, &reads)));
        let other_app = CallView {
            consumer_app: "bpp",
            ..call
        };
        assert_ne!(hash_of(&m), hash_of(&masked(&other_app, &reads)));
        let w = wit_call(&m, &reads, false);
        assert_eq!((w.payload_size, w.payload), (0, None));
        let with_payload = InterceptReads {
            payload: true,
            ..reads
        };
        let w = wit_call(&masked(&call, &with_payload), &with_payload, true);
        assert_eq!(
            (w.payload_size, w.payload.as_deref()),
            (4, Some(&b"body"[..]))
        );
    }
}
