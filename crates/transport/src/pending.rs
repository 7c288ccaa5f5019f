//! A connection's calls waiting for their answers, each with its deadline, and the one
//! timer that fails those whose deadline passed.
//!
//! One timer per connection, not one per call: a timer per call registered in tokio's
//! timer wheel when the call first waited and was taken out again when the answer came,
//! about 0.35 µs of CPU on every request (`docs/performance.md`, "One timer a
//! connection"), and its `Sleep` made every call's future larger. Here a call writes its
//! deadline beside its waiter, under the lock the table takes anyway, and compares it with
//! the earliest the timer is set for; only an earlier one wakes the timer. The timer then
//! fires at that earliest deadline, fails whichever calls are past theirs, and sets itself
//! for the earliest left. The earliest is kept lazily: a call that finished leaves it
//! where it was, so the timer may wake to find nothing due, and moves on. When every call
//! has the same timeout that is once per timeout per connection, however many calls ran.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use rustc_hash::FxHashMap;
use tokio::sync::Notify;

use crate::answer;

/// Where a call's answer is delivered.
pub(crate) type Waiter = answer::Sender;

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
}

/// The table of calls waiting on one connection.
#[derive(Default)]
pub(crate) struct Pending {
    calls: Mutex<Calls>,
    /// Told when a call's deadline comes before the one the timer is set for.
    earlier: Notify,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the call `id`, to be failed with a timeout at `deadline` if it is still here.
    pub(crate) fn insert(&self, id: u64, waiter: Waiter, deadline: Option<Instant>) {
        let earlier = {
            let mut calls = self.lock();
            calls.entries.insert(id, Entry { waiter, deadline });
            match (deadline, calls.earliest) {
                (Some(d), Some(at)) if d >= at => false,
                (Some(d), _) => {
                    calls.earliest = Some(d);
                    true
                }
                (None, _) => false,
            }
        };
        if earlier {
            // Stored when the timer is not waiting: it sees it on its next wait.
            self.earlier.notify_one();
        }
    }

    /// Removes the call `id`; also says whether the table is empty after it.
    pub(crate) fn remove(&self, id: u64) -> (Option<Waiter>, bool) {
        let mut calls = self.lock();
        let waiter = calls.entries.remove(&id).map(|e| e.waiter);
        (waiter, calls.entries.is_empty())
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().entries.is_empty()
    }

    /// Removes every call.
    pub(crate) fn drain(&self) -> Vec<Waiter> {
        let mut calls = self.lock();
        calls.earliest = None;
        calls.entries.drain().map(|(_, e)| e.waiter).collect()
    }

    /// Waits until a deadline passes, then removes and returns the calls past theirs
    /// (their ids, to cancel them at the peer). Cancel-safe: nothing is removed before
    /// the wait ends.
    pub(crate) async fn expired(&self) -> Vec<(u64, Waiter)> {
        loop {
            let at = self.lock().earliest;
            match at {
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

    /// Removes the calls whose deadline is `now` or before, and sets the earliest to the
    /// earliest left. Nothing to do (and no walk of the table) before the earliest.
    fn take_due(&self, now: Instant) -> Vec<(u64, Waiter)> {
        let mut calls = self.lock();
        if calls.earliest.is_none_or(|at| at > now) {
            return Vec::new();
        }
        let taken = calls
            .entries
            .extract_if(|_, e| e.deadline.is_some_and(|d| d <= now))
            .map(|(id, e)| (id, e.waiter))
            .collect();
        calls.earliest = calls.entries.values().filter_map(|e| e.deadline).min();
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        pending.insert(1, waiter(&pool), Some(t0 + ms(30)));
        pending.insert(2, waiter(&pool), Some(t0 + ms(10)));
        pending.insert(3, waiter(&pool), None);
        pending.insert(4, waiter(&pool), Some(t0 + ms(20)));
        assert_eq!(pending.lock().earliest, Some(t0 + ms(10)));

        assert!(pending.take_due(t0 + ms(5)).is_empty());
        let mut due: Vec<u64> = pending.take_due(t0 + ms(20)).iter().map(|d| d.0).collect();
        due.sort_unstable();
        assert_eq!(due, [2, 4]);
        assert_eq!(pending.lock().earliest, Some(t0 + ms(30)));
        assert_eq!(pending.len(), 2);

        // A finished call leaves the earliest early: the next look finds nothing due,
        // and the earliest goes to what is left (none with a deadline).
        assert!(pending.remove(1).0.is_some());
        assert!(pending.take_due(t0 + ms(40)).is_empty());
        assert_eq!(pending.lock().earliest, None);
        assert_eq!(pending.len(), 1);
        let (heartbeat, empty) = pending.remove(3);
        assert!(heartbeat.is_some() && empty);
    }

    #[tokio::test]
    async fn the_timer_wakes_for_an_earlier_deadline_added_while_it_waits() {
        let pool = answer::Pool::default();
        let pending = std::sync::Arc::new(Pending::default());
        pending.insert(
            1,
            waiter(&pool),
            Some(Instant::now() + Duration::from_secs(600)),
        );
        let timer = tokio::spawn({
            let pending = pending.clone();
            async move { pending.expired().await }
        });
        // The timer is waiting for the first call's deadline, ten minutes away.
        tokio::task::yield_now().await;
        pending.insert(
            2,
            waiter(&pool),
            Some(Instant::now() + Duration::from_millis(20)),
        );
        let due = tokio::time::timeout(Duration::from_secs(60), timer)
            .await
            .expect("the timer woke for the earlier deadline")
            .expect("timer");
        assert_eq!(due.iter().map(|d| d.0).collect::<Vec<_>>(), [2]);
        assert_eq!(pending.len(), 1);
    }
}
