//! The slot a call's answer is delivered in: what a oneshot channel does, but the slot is
//! reused. A oneshot allocates its shared state for every request; here a finished call
//! gives its slot back to the process's pool ([`Pool::shared`]), and the next call takes
//! it, so the steady state allocates none. The pool is not a connection's: a waiting
//! call holds its slot and nothing of the connection (`sent.rs`), so giving the slot back
//! must not need the connection. A slot is only given back when the call holds the last
//! reference to it (the reader delivered and let go, or the waiter was removed from the
//! pending table), so a late delivery can never land in another call's slot.
//!
//! The pool keeps its spare slots per thread (`axle_core::striped`): a slot goes back to
//! the thread its call ended on and is taken again by a call that thread sends, so the
//! slot's line and the list's are that core's own. One list under one lock was written by
//! every call on every core, twice a call (`docs/performance.md`, "Spare answer slots per
//! thread"). A thread whose list is empty takes half of another's: calls often end on
//! another core than the one they were sent from (the reader's), so slots drift towards
//! it, and taking them back in halves keeps that a rare, batched move, not an allocation.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Waker};

use axle_core::striped::Striped;
use axle_wire::Frame;

use crate::TransportError;

type Outcome = Result<Frame, TransportError>;

/// Slots kept for reuse at most by a pool's lists of the threads that own one, shared out
/// among them (at least [`THREAD_MIN`] each; `axle_core::striped`); a list that threads
/// numbered later share keeps as many as one of those. More calls in flight at once
/// allocate beyond it, and those slots are freed when done. The process has one pool for
/// all its connections.
const POOL_MAX: usize = 4096;

/// The fewest spare slots a thread's list keeps, however many threads share the pool.
const THREAD_MIN: usize = 64;

// The answer is kept inline: the slot is allocated once and reused, and boxing the frame
// would put back the allocation per request this file exists to remove.
#[allow(clippy::large_enum_variant)]
enum State {
    /// Nothing delivered yet; the waker of the call waiting, once it has polled.
    Waiting(Option<Waker>),
    Done(Outcome),
    /// The sender went away without delivering (the connection's tasks are gone).
    Closed,
}

struct Slot(Mutex<State>);

impl Slot {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Spare slots, a list per thread.
pub(crate) struct Pool {
    lists: Striped<Mutex<Vec<Arc<Slot>>>>,
    /// The most spares a thread's list keeps: its share of [`POOL_MAX`].
    keep: usize,
}

impl Default for Pool {
    fn default() -> Self {
        let lists: Striped<_> = Striped::default();
        let keep = (POOL_MAX / lists.owners()).max(THREAD_MIN);
        Pool { lists, keep }
    }
}

fn lock(spares: &Mutex<Vec<Arc<Slot>>>) -> MutexGuard<'_, Vec<Arc<Slot>>> {
    spares.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// The process's pool, which every connection's calls take their slots from.
    pub(crate) fn shared() -> &'static Pool {
        static SHARED: std::sync::LazyLock<Pool> = std::sync::LazyLock::new(Pool::default);
        &SHARED
    }

    /// A fresh slot (reused when one is spare) and its two ends.
    pub(crate) fn pair(&self) -> (Sender, Answer<'_>) {
        let slot = self
            .spare()
            .unwrap_or_else(|| Arc::new(Slot(Mutex::new(State::Waiting(None)))));
        let sender = Sender(Some(slot.clone()));
        (
            sender,
            Answer {
                slot: Some(slot),
                pool: self,
            },
        )
    }

    /// A spare slot: this thread's, else half of the first other list that has any.
    /// Another list is only tried, never waited for: its thread may be doing the same
    /// with this one.
    fn spare(&self) -> Option<Arc<Slot>> {
        let local = self.lists.local();
        let mut own = lock(local);
        if let Some(slot) = own.pop() {
            return Some(slot);
        }
        for other in self
            .lists
            .each()
            .filter(|other| !std::ptr::eq(*other, local))
        {
            let mut other = match other.try_lock() {
                Ok(other) => other,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            let from = other.len() / 2;
            own.extend(other.drain(from..));
            drop(other);
            if let Some(slot) = own.pop() {
                return Some(slot);
            }
        }
        None
    }

    /// Keeps `slot` (emptied, no other holder) for this thread's next call, unless its
    /// list is full.
    fn give_back(&self, slot: Arc<Slot>) {
        let mut own = lock(self.lists.local());
        if own.len() < self.keep {
            own.push(slot);
        }
    }
}

/// The delivering end, kept in the pending table until the answer comes.
pub(crate) struct Sender(Option<Arc<Slot>>);

impl Sender {
    /// Delivers `outcome` and wakes the call. Lets go of the slot before waking, so the
    /// call usually finds itself its last holder and can give the slot back.
    pub(crate) fn send(mut self, outcome: Outcome) {
        self.finish(State::Done(outcome));
    }

    fn finish(&mut self, end: State) {
        let Some(slot) = self.0.take() else { return };
        let waker = {
            let mut state = slot.state();
            match std::mem::replace(&mut *state, end) {
                State::Waiting(waker) => waker,
                // Cannot happen (only this end delivers, once); keep what is there.
                other => {
                    *state = other;
                    None
                }
            }
        };
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.finish(State::Closed);
    }
}

/// The waiting end: resolves to the answer, or to `Err(Closed)` when the sender was
/// dropped without one.
pub(crate) struct Answer<'a> {
    slot: Option<Arc<Slot>>,
    pool: &'a Pool,
}

/// The sender went away without an answer.
#[derive(Debug)]
pub(crate) struct Closed;

impl Future for Answer<'_> {
    type Output = Result<Outcome, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(slot) = &self.slot else {
            return Poll::Ready(Err(Closed)); // polled after it finished
        };
        let mut state = slot.state();
        match std::mem::replace(&mut *state, State::Closed) {
            State::Done(outcome) => Poll::Ready(Ok(outcome)),
            State::Closed => Poll::Ready(Err(Closed)),
            State::Waiting(waker) => {
                let waker = match waker {
                    Some(w) if w.will_wake(cx.waker()) => w,
                    _ => cx.waker().clone(),
                };
                *state = State::Waiting(Some(waker));
                Poll::Pending
            }
        }
    }
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        // The last holder: nothing can deliver into it any more, so it can serve again.
        if Arc::strong_count(&slot) == 1 {
            *slot.state() = State::Waiting(None);
            self.pool.give_back(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axle_core::striped::MAX_STRIPES;
    use axle_wire::Kind;

    fn frame(id: u64) -> Frame {
        Frame::bare(Kind::Pong, id)
    }

    #[tokio::test]
    async fn an_answer_sent_before_or_after_waiting_arrives() {
        let pool = Pool::default();
        let (tx, rx) = pool.pair();
        tx.send(Ok(frame(1)));
        assert_eq!(rx.await.expect("answer").expect("ok").id, 1);

        let (tx, rx) = pool.pair();
        let deliver = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.send(Ok(frame(2)));
        });
        assert_eq!(rx.await.expect("answer").expect("ok").id, 2);
        deliver.await.expect("task");
    }

    #[tokio::test]
    async fn a_sender_dropped_without_an_answer_closes_the_slot() {
        let pool = Pool::default();
        let (tx, rx) = pool.pair();
        let drop_later = tokio::spawn(async move {
            tokio::task::yield_now().await;
            drop(tx);
        });
        assert!(rx.await.is_err());
        drop_later.await.expect("task");
    }

    #[test]
    fn a_finished_slot_is_reused_clean() {
        let pool = Pool::default();
        let (tx, rx) = pool.pair();
        let first = Arc::as_ptr(rx.slot.as_ref().expect("slot"));
        tx.send(Ok(frame(1)));
        drop(rx); // delivered but never read: the slot still comes back empty
        let (tx, rx) = pool.pair();
        assert_eq!(Arc::as_ptr(rx.slot.as_ref().expect("slot")), first);
        assert!(matches!(
            *rx.slot.as_ref().unwrap().state(),
            State::Waiting(None)
        ));
        drop(tx);
        drop(rx);
    }

    #[test]
    fn a_slot_still_held_by_its_sender_is_not_reused() {
        let pool = Pool::default();
        let (tx, rx) = pool.pair();
        let first = Arc::as_ptr(rx.slot.as_ref().expect("slot"));
        drop(rx); // the call gave up; the sender is still in the pending table
        let (_tx2, rx2) = pool.pair();
        assert_ne!(Arc::as_ptr(rx2.slot.as_ref().expect("slot")), first);
        // The late delivery goes to the old slot alone.
        tx.send(Ok(frame(9)));
        assert!(matches!(
            *rx2.slot.as_ref().unwrap().state(),
            State::Waiting(None)
        ));
    }

    /// Calls on one thread, each delivered and finished there: its slots go to its list.
    /// The slots' addresses, in the order they were given back.
    fn finish_on_this_thread(pool: &Pool, calls: usize) -> Vec<usize> {
        let pairs: Vec<_> = (0..calls).map(|_| pool.pair()).collect();
        let mut slots = Vec::new();
        for (tx, rx) in pairs {
            slots.push(Arc::as_ptr(rx.slot.as_ref().expect("slot")) as usize);
            tx.send(Ok(frame(1)));
            drop(rx);
        }
        slots
    }

    #[test]
    fn a_thread_with_no_spares_takes_half_of_another_threads() {
        let pool = Pool::default();
        // On a thread whose list is not this one's (threads numbered past the owned lists
        // share the others by their numbers modulo them: try threads until one does not).
        let mine = pool.lists.local() as *const _ as usize;
        let given_back = std::iter::repeat_with(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    (pool.lists.local() as *const _ as usize != mine)
                        .then(|| finish_on_this_thread(&pool, 8))
                })
                .join()
                .expect("thread")
            })
        })
        .take(2 * MAX_STRIPES)
        .find_map(|given_back| given_back)
        .expect("a thread with a list of its own");
        assert_eq!(pool.lists.each().map(|l| lock(l).len()).sum::<usize>(), 8);
        // This thread's list is empty: its first call takes half of the other's (the last
        // given back, which it uses at once), not a new slot.
        let (tx, rx) = pool.pair();
        let taken = Arc::as_ptr(rx.slot.as_ref().expect("slot")) as usize;
        assert!(given_back.contains(&taken));
        assert_eq!(lock(pool.lists.local()).len(), 3, "half taken, one in use");
        let others: usize = pool
            .lists
            .each()
            .filter(|l| !std::ptr::eq(*l, pool.lists.local()))
            .map(|l| lock(l).len())
            .sum();
        assert_eq!(others, 4, "half left where it was");
        drop(tx);
        drop(rx);
    }

    #[test]
    fn a_thread_keeps_at_most_its_share_of_spares() {
        let pool = Pool::default();
        let keep = (POOL_MAX / pool.lists.owners()).max(THREAD_MIN);
        finish_on_this_thread(&pool, keep + 10);
        assert_eq!(lock(pool.lists.local()).len(), keep);
    }
}
