//! DEDUP: a method with `dedup-ttl-ms` remembers, by request id, the requests it ran and
//! their answers, so a repeat (a caller's retry after a lost answer, with the same id) is
//! answered from memory instead of running the handler twice.
//!
//! - A repeat of a finished request gets the stored answer (its own frame id).
//! - A repeat of a request still running waits for its answer, within its own deadline.
//! - A request refused before its handler ran (limiter, concurrency guard, fuse) is
//!   forgotten: a repeat may run it.
//! - A request whose handler was cut short (its future dropped mid-run) is remembered as
//!   `internal`: it may have had effects, so it is not run again here.
//!
//! The table is bounded: entries expire after the TTL, and past `dedup-max-entries` or
//! `dedup-max-bytes` of answers the oldest finished entries go first; when the oldest
//! entry is still running, a new request is refused `overloaded` (its handler did not run). It lives
//! in the provider's memory: a restart forgets it, and another provider never saw it
//! (docs/governance.md states the guarantee).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use axle_governance::Governance;
use axle_wire::{ErrorClass, Frame};

type Id = [u8; 16];

/// One method's table of requests it ran.
pub struct Dedup {
    ttl: Duration,
    max_entries: usize,
    max_bytes: u64,
    table: Mutex<Table>,
    /// Repeats answered from the table (finished or waited for).
    repeats: AtomicU64,
}

#[derive(Default)]
struct Table {
    entries: HashMap<Id, Entry>,
    /// Ids in the order they came (an id may linger here after its entry left).
    order: VecDeque<Id>,
    /// Payload bytes of the stored answers.
    bytes: u64,
}

enum Entry {
    Running(watch::Receiver<Option<Arc<Frame>>>),
    Done { answer: Arc<Frame>, until: Instant },
}

/// What a request is to the table.
pub enum Seen<'a> {
    /// Not seen (or forgotten): run it, and say how it ended through the [`Run`].
    New(Run<'a>),
    /// Seen: this is its answer (or the wait for it).
    Repeat(Repeat),
    /// The table is full of requests still running.
    Full,
}

impl Dedup {
    /// The table of a method whose governance asks for one.
    pub fn of(g: &Governance) -> Option<Dedup> {
        (g.dedup_ttl_ms > 0).then(|| Dedup {
            ttl: Duration::from_millis(g.dedup_ttl_ms),
            max_entries: g.dedup_max_entries as usize,
            max_bytes: g.dedup_max_bytes,
            table: Mutex::default(),
            repeats: AtomicU64::new(0),
        })
    }

    /// Looks `id` up, and starts remembering it if it is new.
    pub fn begin(&self, id: Id) -> Seen<'_> {
        let now = Instant::now();
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        match t.entries.get(&id) {
            Some(Entry::Done { answer, until }) if *until > now => {
                return Seen::Repeat(Repeat::Done(answer.clone()))
            }
            Some(Entry::Running(rx)) => return Seen::Repeat(Repeat::Running(rx.clone())),
            Some(Entry::Done { .. }) => t.remove(&id),
            None => {}
        }
        t.purge(now, self.max_entries.saturating_sub(1), self.max_bytes);
        if t.entries.len() >= self.max_entries {
            return Seen::Full;
        }
        let (tx, rx) = watch::channel(None);
        t.entries.insert(id, Entry::Running(rx));
        t.order.push_back(id);
        Seen::New(Run {
            dedup: self,
            id,
            tx: Some(tx),
        })
    }

    /// A repeat was answered from the table.
    pub fn repeated(&self) {
        self.repeats.fetch_add(1, Relaxed);
    }

    /// Repeats answered from the table so far.
    pub fn repeats(&self) -> u64 {
        self.repeats.load(Relaxed)
    }

    fn settle(&self, id: Id, answer: Arc<Frame>, keep: bool) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if keep {
            t.bytes += answer.payload.len() as u64;
            let until = Instant::now() + self.ttl;
            t.entries.insert(id, Entry::Done { answer, until });
            t.purge(Instant::now(), self.max_entries, self.max_bytes);
        } else {
            t.remove(&id);
        }
    }

    /// Requests remembered now (running or finished).
    pub fn remembered(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }
}

impl Table {
    fn remove(&mut self, id: &Id) {
        if let Some(Entry::Done { answer, .. }) = self.entries.remove(id) {
            self.bytes -= answer.payload.len() as u64;
        }
    }

    /// Drops expired entries from the front, then the oldest finished ones while there
    /// are more than `max_entries` or `max_bytes`. Stops at a running entry (it stays).
    fn purge(&mut self, now: Instant, max_entries: usize, max_bytes: u64) {
        while let Some(id) = self.order.front().copied() {
            let over = self.entries.len() > max_entries || self.bytes > max_bytes;
            match self.entries.get(&id) {
                None => {}
                Some(Entry::Done { until, .. }) if *until <= now || over => self.remove(&id),
                Some(_) => break,
            }
            self.order.pop_front();
        }
    }
}

/// A request the table is remembering while its handler runs.
pub struct Run<'a> {
    dedup: &'a Dedup,
    id: Id,
    tx: Option<watch::Sender<Option<Arc<Frame>>>>,
}

impl Run<'_> {
    /// The request was answered; `ran`: its handler started (a refusal before it did is
    /// forgotten, so a repeat may run it). Repeats waiting get the same answer.
    pub fn finish(mut self, answer: &Frame, ran: bool) {
        self.settle(Arc::new(answer.clone()), ran);
    }

    fn settle(&mut self, answer: Arc<Frame>, keep: bool) {
        if let Some(tx) = self.tx.take() {
            self.dedup.settle(self.id, answer.clone(), keep);
            let _ = tx.send(Some(answer));
        }
    }
}

impl Drop for Run<'_> {
    /// Dropped unfinished: the handler was cut short mid-run. It may have had effects, so
    /// the request is remembered as failed rather than run again.
    fn drop(&mut self) {
        let cut = Frame::error(
            0,
            ErrorClass::Internal,
            "an earlier attempt of this request was cut short while running; \
             it is not run again",
        );
        self.settle(Arc::new(cut), true);
    }
}

/// A repeat's answer: stored, or coming.
pub enum Repeat {
    Done(Arc<Frame>),
    Running(watch::Receiver<Option<Arc<Frame>>>),
}

impl Repeat {
    /// The answer for the repeat with frame id `id`, waiting at most until `deadline`.
    pub async fn answer(self, id: u64, deadline: Option<Instant>) -> Frame {
        let stored = match self {
            Repeat::Done(answer) => answer,
            Repeat::Running(mut rx) => {
                let wait = rx.wait_for(Option::is_some);
                let waited = match deadline {
                    Some(d) => tokio::time::timeout_at(d.into(), wait).await.ok(),
                    None => Some(wait.await),
                };
                match waited.and_then(|r| r.ok().and_then(|answer| answer.clone())) {
                    Some(answer) => answer,
                    None => {
                        return Frame::error(
                            id,
                            ErrorClass::DeadlineExceeded,
                            "the first attempt of this request is still running",
                        )
                    }
                }
            }
        };
        let mut frame = Frame::clone(&stored);
        frame.id = id;
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn table(ttl_ms: u64, max_entries: u32, max_bytes: u64) -> Dedup {
        Dedup::of(&Governance {
            dedup_ttl_ms: ttl_ms,
            dedup_max_entries: max_entries,
            dedup_max_bytes: max_bytes,
            ..Governance::default()
        })
        .unwrap()
    }

    fn answer(bytes: &'static [u8]) -> Frame {
        Frame::response(1, None, Bytes::from_static(bytes))
    }

    fn new(d: &Dedup, id: u8) -> Run<'_> {
        match d.begin([id; 16]) {
            Seen::New(run) => run,
            _ => panic!("{id} is not new"),
        }
    }

    #[tokio::test]
    async fn a_repeat_gets_the_first_answer_with_its_own_id() {
        let d = table(60_000, 10, 1 << 20);
        new(&d, 1).finish(&answer(b"first"), true);
        let Seen::Repeat(r) = d.begin([1; 16]) else {
            panic!("not a repeat")
        };
        let f = r.answer(42, None).await;
        assert_eq!((f.id, &f.payload[..]), (42, &b"first"[..]));
    }

    #[tokio::test]
    async fn a_repeat_of_a_running_request_waits_for_its_answer() {
        let d = Arc::new(table(60_000, 10, 1 << 20));
        let run = new(&d, 1);
        let Seen::Repeat(r) = d.begin([1; 16]) else {
            panic!("not a repeat")
        };
        let waiting = tokio::spawn(r.answer(7, None));
        tokio::task::yield_now().await;
        run.finish(&answer(b"late"), true);
        assert_eq!(&waiting.await.unwrap().payload[..], b"late");
        // Within its own deadline only.
        let _run = new(&d, 2);
        let Seen::Repeat(r) = d.begin([2; 16]) else {
            panic!("not a repeat")
        };
        let soon = Instant::now() + Duration::from_millis(20);
        let f = r.answer(8, Some(soon)).await;
        assert_eq!(f.meta.error_class, Some(ErrorClass::DeadlineExceeded));
    }

    #[test]
    fn refusals_are_forgotten_cut_runs_are_not() {
        let d = table(60_000, 10, 1 << 20);
        let refused = Frame::error(1, ErrorClass::Overloaded, "busy");
        new(&d, 1).finish(&refused, false);
        assert!(matches!(d.begin([1; 16]), Seen::New(_)), "may run now");
        drop(new(&d, 2));
        let Seen::Repeat(Repeat::Done(f)) = d.begin([2; 16]) else {
            panic!("remembered")
        };
        assert_eq!(f.meta.error_class, Some(ErrorClass::Internal));
    }

    #[test]
    fn entries_expire_and_the_table_stays_bounded() {
        let d = table(1, 3, 1 << 20);
        new(&d, 1).finish(&answer(b"a"), true);
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(d.begin([1; 16]), Seen::New(_)), "expired");
        let d = table(60_000, 3, 1 << 20);
        for id in 1..=10 {
            new(&d, id).finish(&answer(b"a"), true);
            assert!(d.remembered() <= 3);
        }
        assert!(
            matches!(d.begin([10; 16]), Seen::Repeat(_)),
            "the newest stay"
        );
        assert!(matches!(d.begin([1; 16]), Seen::New(_)), "the oldest went");
        // Every entry running: a new request is refused, not remembered past the bound.
        let d = table(60_000, 2, 1 << 20);
        let (_a, _b) = (new(&d, 1), new(&d, 2));
        assert!(matches!(d.begin([3; 16]), Seen::Full));
    }

    #[test]
    fn answer_bytes_are_bounded_too() {
        let d = table(60_000, 100, 2048);
        static BIG: [u8; 1000] = [0; 1000];
        for id in 1..=5 {
            new(&d, id).finish(&answer(&BIG), true);
        }
        assert_eq!(d.remembered(), 2, "two answers of 1,000 bytes fit in 2,048");
    }
}
