//! Result caching (`cache-ttl-ms`, `cache-max-entries`): a method's successful answers,
//! kept by the caller for a while and given to the same request again without sending
//! it. Opt-in per method, and only for idempotent methods (the manifest refuses it
//! elsewhere): a cached answer means the handler does not run.
//!
//! The key is the method, the request's content type and its encoded bytes (the service
//! is the cache's owner); one cache per method policy, so methods the manifest does not
//! declare never cache. Entries live `cache-ttl-ms` at most and there are at most
//! `cache-max-entries`: the oldest goes first. Every entry has the same lifetime, so the
//! insertion order is also the expiry order and one queue serves both bounds.
//!
//! Only a call to a caching method reaches this file: others pay one `Option` check.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHasher};

use axle_governance::Governance;

use crate::Reply;

/// One method policy's cached answers.
pub struct Cache {
    ttl: Duration,
    max: usize,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// By the hash of the key; the entry keeps the key itself, so a collision is a miss.
    map: FxHashMap<u64, Entry>,
    /// (hash, expiry) in insertion order; a pair whose entry was replaced since is stale
    /// and skipped.
    order: VecDeque<(u64, Instant)>,
}

struct Entry {
    method: Box<str>,
    content_type: Box<str>,
    body: Bytes,
    reply: Reply,
    expires: Instant,
}

impl Entry {
    fn is(&self, method: &str, content_type: &str, body: &[u8]) -> bool {
        &*self.method == method && &*self.content_type == content_type && self.body == body
    }
}

fn hash(method: &str, content_type: &str, body: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    (method, content_type, body).hash(&mut h);
    h.finish()
}

impl Cache {
    /// The cache `governance` asks for, if any.
    pub fn of(governance: &Governance) -> Option<Cache> {
        (governance.cache_ttl_ms > 0).then(|| Cache {
            ttl: Duration::from_millis(governance.cache_ttl_ms),
            max: governance.cache_max_entries.max(1) as usize,
            entries: Mutex::default(),
        })
    }

    /// The answer kept for this request, if it has not expired.
    pub fn get(&self, method: &str, content_type: &str, body: &[u8]) -> Option<Reply> {
        let key = hash(method, content_type, body);
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.map.get(&key)?;
        if !entry.is(method, content_type, body) {
            return None;
        }
        if entry.expires <= now {
            entries.map.remove(&key);
            return None;
        }
        Some(entry.reply.clone())
    }

    /// Keeps `reply` (a real answer, never a fallback) for this request.
    pub fn put(&self, method: &str, content_type: &str, body: &Bytes, reply: &Reply) {
        if reply.fallback {
            return;
        }
        let key = hash(method, content_type, body);
        let now = Instant::now();
        let expires = now + self.ttl;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.evict(now, self.max);
        entries.map.insert(
            key,
            Entry {
                method: method.into(),
                content_type: content_type.into(),
                body: body.clone(),
                reply: reply.clone(),
                expires,
            },
        );
        entries.order.push_back((key, expires));
    }

    /// How many answers are kept now (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.map.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Entries {
    /// Drops expired entries, then the oldest until one more fits under `max`. The queue
    /// is also kept under twice `max` (stale pairs of replaced entries count in it).
    fn evict(&mut self, now: Instant, max: usize) {
        while let Some(&(key, expires)) = self.order.front() {
            let full = self.map.len() >= max || self.order.len() >= 2 * max;
            if expires > now && !full {
                break;
            }
            self.order.pop_front();
            if self.map.get(&key).is_some_and(|e| e.expires == expires) {
                self.map.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(ttl_ms: u64, max: u32) -> Cache {
        let g = Governance {
            cache_ttl_ms: ttl_ms,
            cache_max_entries: max,
            idempotent: true,
            ..Governance::default()
        };
        Cache::of(&g).expect("caching is on")
    }

    fn reply(text: &'static str) -> Reply {
        Reply {
            payload: Bytes::from_static(text.as_bytes()),
            content_type: "application/json".into(),
            endpoint: Some(1),
            fallback: false,
        }
    }

    #[test]
    fn off_unless_a_ttl_is_set() {
        assert!(Cache::of(&Governance::default()).is_none());
    }

    #[test]
    fn the_same_request_is_answered_and_a_different_one_is_not() {
        let c = cache(60_000, 10);
        let body = Bytes::from_static(b"{\"k\":1}");
        assert_eq!(c.get("get", "application/json", &body), None);
        c.put("get", "application/json", &body, &reply("one"));
        assert_eq!(c.get("get", "application/json", &body), Some(reply("one")));
        // Method, content type and bytes are all part of the key.
        assert_eq!(c.get("other", "application/json", &body), None);
        assert_eq!(c.get("get", "application/msgpack", &body), None);
        assert_eq!(c.get("get", "application/json", b"{\"k\":2}"), None);
    }

    #[test]
    fn fallbacks_are_never_kept() {
        let c = cache(60_000, 10);
        let body = Bytes::from_static(b"x");
        let fallback = Reply {
            fallback: true,
            ..reply("fallback")
        };
        c.put("get", "t", &body, &fallback);
        assert!(c.is_empty());
    }

    #[test]
    fn entries_expire() {
        let c = cache(1, 10);
        let body = Bytes::from_static(b"x");
        c.put("get", "t", &body, &reply("one"));
        let put = Instant::now();
        // Waits for the state (the entry's expiry), not for a guessed duration.
        while Instant::now() < put + Duration::from_millis(2) {
            std::thread::yield_now();
        }
        assert_eq!(c.get("get", "t", &body), None);
    }

    #[test]
    fn the_oldest_goes_when_full() {
        let c = cache(60_000, 2);
        let bodies: Vec<Bytes> = (0..3u8).map(|i| Bytes::from(vec![i])).collect();
        for b in &bodies {
            c.put("get", "t", b, &reply("r"));
        }
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("get", "t", &bodies[0]), None);
        assert!(c.get("get", "t", &bodies[1]).is_some());
        assert!(c.get("get", "t", &bodies[2]).is_some());
        // Replacing one entry again and again keeps the queue bounded.
        for _ in 0..100 {
            c.put("get", "t", &bodies[2], &reply("r"));
        }
        assert!(c.entries.lock().unwrap().order.len() <= 4);
        assert!(c.get("get", "t", &bodies[2]).is_some());
    }
}
