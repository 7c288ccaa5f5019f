//! A connection's calls waiting for their answers, each with its deadline, and the one
//! timer that fails those whose deadline passed.
//!
//! One timer per connection, not one per call: a timer per call registered in tokio's
//! timer wheel when the call first waited and was taken out again when the answer came,
//! about 0.35 µs of CPU on every request (`docs/performance.md`, "One timer a
//! connection"), and its `Sleep` made every call's future larger. Here a call writes its
//! deadline beside its waiter, under the lock its table takes anyway, and compares it with
//! that table's earliest; only an earlier one wakes the timer. The timer fires at the
//! earliest of all the tables, fails whichever calls are past theirs, and sets itself for
//! the earliest left. Each earliest is kept lazily: a call that finished leaves it where
//! it was, so the timer may wake to find nothing due, and moves on. When every call
//! has the same timeout that is once per timeout per connection, however many calls ran.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use axle_core::striped::{Striped, MAX_STRIPES};
use rustc_hash::FxHashMap;
use tokio::sync::Notify;

use crate::answer;

/// Where a call's answer is delivered.
pub(crate) type Waiter = answer::Sender;

/// The low bits of a call's id that name the table it is in.
const TABLE_BITS: u32 = MAX_STRIPES.trailing_zeros();

struct Entry {
    waiter: Waiter,
    /// `None`: no deadline here (a heartbeat, which times itself).
    deadline: Option<Instant>,
}

#[derive(Default)]
struct Calls {
    /// By frame id. Ids are this side's own (a counter), so a fast hash is safe: the peer
    /// only names ids to look up, never to insert.
    entries: FxHashMap<u64, Entry>,
    /// No later than the earliest deadline of any entry: exact when set, early once the
    /// call it was for has finished. `None` when no entry has a deadline.
    earliest: Option<Instant>,
    /// The last id given here, without the table's number.
    last: u64,
}

/// The calls waiting on one connection: a table per thread that sends (`axle_core::
/// striped`), each under its own lock. A call is entered in the table of the thread that
/// sends it, and its id carries that table's number in its low bits, so the reader finds
/// it again. One table under one lock was written by every call from every core, by the
/// caller and again by the reader (`docs/performance.md`, "A table of calls per thread");
/// now a call sent from the reader's core stays on that core's lines.
#[derive(Default)]
pub(crate) struct Pending {
    tables: Striped<Mutex<Calls>>,
    /// Told when a call's deadline comes before the one its table had.
    earlier: Notify,
}

fn lock(table: &Mutex<Calls>) -> MutexGuard<'_, Calls> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pending {
    /// Enters a call, to be failed with a timeout at `deadline` if it is still here; with
    /// its id (never 0).
    pub(crate) fn insert(&self, waiter: Waiter, deadline: Option<Instant>) -> u64 {
        let (number, table) = self.tables.local_numbered();
        let (id, earlier) = {
            let mut calls = lock(table);
            calls.last += 1;
            let id = (calls.last << TABLE_BITS) | number as u64;
            calls.entries.insert(id, Entry { waiter, deadline });
            let earlier = match (deadline, calls.earliest) {
                (Some(d), Some(at)) if d >= at => false,
                (Some(d), _) => {
                    calls.earliest = Some(d);
                    true
                }
                (None, _) => false,
            };
            (id, earlier)
        };
        if earlier {
            // Stored when the timer is not waiting: it sees it on its next wait.
            self.earlier.notify_one();
        }
        id
    }

    /// Removes the call `id` (an id this side never gave finds nothing).
    pub(crate) fn remove(&self, id: u64) -> Option<Waiter> {
        let table = self.tables.get((id & (MAX_STRIPES as u64 - 1)) as usize)?;
        lock(table).entries.remove(&id).map(|e| e.waiter)
    }

    pub(crate) fn len(&self) -> usize {
        self.tables.each().map(|t| lock(t).entries.len()).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tables.each().all(|t| lock(t).entries.is_empty())
    }

    /// Removes every call.
    pub(crate) fn drain(&self) -> Vec<Waiter> {
        let mut all = Vec::new();
        for table in self.tables.each() {
            let mut calls = lock(table);
            calls.earliest = None;
            all.extend(calls.entries.drain().map(|(_, e)| e.waiter));
        }
        all
    }

    /// The earliest deadline of any table (early, as each table's is).
    fn earliest(&self) -> Option<Instant> {
        self.tables.each().filter_map(|t| lock(t).earliest).min()
    }

    /// Waits until a deadline passes, then removes and returns the calls past theirs
    /// (their ids, to cancel them at the peer). Cancel-safe: nothing is removed before
    /// the wait ends.
    pub(crate) async fn expired(&self) -> Vec<(u64, Waiter)> {
        loop {
            match self.earliest() {
                None => self.earlier.notified().await,
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {}
                        () = self.earlier.notified() => {}
                    }
                }
            }
            let due = self.take_due(tokio::time::Instant::now().into_std());
            if !due.is_empty() {
                return due;
            }
        }
    }

    /// Removes the calls whose deadline is `now` or before, and sets each table's earliest
    /// to the earliest left in it. Nothing to do (and no walk) in a table before its
    /// earliest.
    fn take_due(&self, now: Instant) -> Vec<(u64, Waiter)> {
        let mut taken = Vec::new();
        for table in self.tables.each() {
            let mut calls = lock(table);
            if calls.earliest.is_none_or(|at| at > now) {
                continue;
            }
            taken.extend(
                calls
                    .entries
                    .extract_if(|_, e| e.deadline.is_some_and(|d| d <= now))
                    .map(|(id, e)| (id, e.waiter)),
            );
            calls.earliest = calls.entries.values().filter_map(|e| e.deadline).min();
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn waiter(pool: &answer::Pool) -> Waiter {
        pool.pair().0
    }

    #[test]
    fn only_calls_past_their_deadline_are_taken_and_the_earliest_moves_on() {
        let pool = answer::Pool::default();
        let pending = Pending::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let first = pending.insert(waiter(&pool), Some(t0 + ms(30)));
        let second = pending.insert(waiter(&pool), Some(t0 + ms(10)));
        let heartbeat = pending.insert(waiter(&pool), None);
        let fourth = pending.insert(waiter(&pool), Some(t0 + ms(20)));
        assert_eq!(pending.earliest(), Some(t0 + ms(10)));

        assert!(pending.take_due(t0 + ms(5)).is_empty());
        let mut due: Vec<u64> = pending.take_due(t0 + ms(20)).iter().map(|d| d.0).collect();
        due.sort_unstable();
        let mut expected = [second, fourth];
        expected.sort_unstable();
        assert_eq!(due, expected);
        assert_eq!(pending.earliest(), Some(t0 + ms(30)));
        assert_eq!(pending.len(), 2);

        // A finished call leaves the earliest early: the next look finds nothing due,
        // and the earliest goes to what is left (none with a deadline).
        assert!(pending.remove(first).is_some());
        assert!(pending.take_due(t0 + ms(40)).is_empty());
        assert_eq!(pending.earliest(), None);
        assert_eq!(pending.len(), 1);
        assert!(pending.remove(heartbeat).is_some());
        assert!(pending.is_empty());
    }

    #[test]
    fn calls_sent_from_other_threads_are_found_by_their_ids_and_timed_out_together() {
        let pool = answer::Pool::default();
        let pending = Pending::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Eight threads, two calls each: one due at 10 ms, one at 60 s.
        let ids: Vec<(u64, u64)> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let soon = pending.insert(waiter(&pool), Some(t0 + ms(10)));
                        let late = pending.insert(waiter(&pool), Some(t0 + ms(60_000)));
                        (soon, late)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("thread"))
                .collect()
        });
        let mut all: Vec<u64> = ids.iter().flat_map(|(a, b)| [*a, *b]).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 16, "every id is different");
        assert!(!all.contains(&0), "no call is id 0");
        assert_eq!(pending.len(), 16);
        assert_eq!(pending.earliest(), Some(t0 + ms(10)));

        // The timer takes every call past its deadline, whichever thread sent it.
        let mut due: Vec<u64> = pending.take_due(t0 + ms(10)).iter().map(|d| d.0).collect();
        due.sort_unstable();
        let mut soon: Vec<u64> = ids.iter().map(|(a, _)| *a).collect();
        soon.sort_unstable();
        assert_eq!(due, soon);
        assert_eq!(pending.earliest(), Some(t0 + ms(60_000)));

        // The reader finds the rest by id alone, on its own thread.
        for (_, late) in &ids {
            assert!(pending.remove(*late).is_some(), "call {late} found");
            assert!(pending.remove(*late).is_none(), "and removed");
        }
        assert!(pending.is_empty());
        // Ids this side never gave find nothing, whatever table they name.
        assert!(pending.remove(0).is_none());
        assert!(pending.remove(u64::MAX).is_none());
    }

    /// Starts the timer with one call due in ten minutes, lets `enter_soon` enter one due
    /// in 20 ms, and checks that the timer wakes for it and takes it alone.
    async fn the_timer_takes_the_earlier_call(
        enter_soon: impl FnOnce(Arc<Pending>, Arc<answer::Pool>) -> u64,
    ) {
        let pool = Arc::new(answer::Pool::default());
        let pending = Arc::new(Pending::default());
        pending.insert(
            waiter(&pool),
            Some(Instant::now() + Duration::from_secs(600)),
        );
        let timer = tokio::spawn({
            let pending = pending.clone();
            async move { pending.expired().await }
        });
        // The timer is waiting for the first call's deadline, ten minutes away.
        tokio::task::yield_now().await;
        let soon = enter_soon(pending.clone(), pool);
        let due = tokio::time::timeout(Duration::from_secs(60), timer)
            .await
            .expect("the timer woke for the earlier deadline")
            .expect("timer");
        assert_eq!(due.iter().map(|d| d.0).collect::<Vec<_>>(), [soon]);
        assert_eq!(pending.len(), 1);
    }

    fn due_in_20_ms() -> Option<Instant> {
        Some(Instant::now() + Duration::from_millis(20))
    }

    #[tokio::test]
    async fn the_timer_wakes_for_an_earlier_deadline_added_while_it_waits() {
        the_timer_takes_the_earlier_call(|pending, pool| {
            pending.insert(waiter(&pool), due_in_20_ms())
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_timer_wakes_for_an_earlier_deadline_in_another_threads_table() {
        // From a thread of its own: a table the timer has not seen yet.
        the_timer_takes_the_earlier_call(|pending, pool| {
            std::thread::spawn(move || pending.insert(waiter(&pool), due_in_20_ms()))
                .join()
                .expect("thread")
        })
        .await;
    }
}
