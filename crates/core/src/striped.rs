//! Counts that every request writes, kept per thread and summed when read.
//!
//! A counter every request adds to (a method's calls, its latency histogram, a breaker's
//! window count) is one cache line written by every core: each add waits for the line to
//! come over from the core that wrote it last, 50–150 ns on this project's bench machine
//! against a few for a line the core already holds (`docs/performance.md`, "Counts
//! written by every core"). A [`Striped`] value has one copy per thread instead, on a
//! line of its own, made on that thread's first write; readers (people, `/metrics`, a
//! breaker deciding after a failure) add the copies up. Java's `LongAdder` and Envoy's
//! per-worker stats do the same.
//!
//! Threads are numbered in the order they first write any striped value. The threads
//! numbered first, twice as many as the machine has cores (at least [`MIN_OWNED`], at
//! most [`MAX_OWNED`]), each own the copy their number names: no other thread ever
//! writes it. A runtime's workers are numbered early; threads numbered after them (those
//! that come and go later) share a quarter as many copies again, by their numbers, and
//! two that share a copy only wait for each other as every thread did before.
//!
//! So a count in an owned copy needs no locked instruction: a load and a store add to it
//! ([`Writers::One`]), where `fetch_add` is a locked instruction of about 10 ns even on a
//! line the core holds; a shared copy is added to atomically ([`Writers::Many`]). Readers
//! load either with atomics, so they see a count before or after an add, as before
//! (`docs/performance.md`, "Counts added by their one writer").

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

/// A bound on a copy's index, a power of two: owned and shared copies together are fewer
/// (each made only when a thread writes it).
pub const MAX_STRIPES: usize = 128;

/// The fewest owned copies: a process has more threads than a small machine has cores
/// (a runtime's workers, the main thread, the blocking pool).
const MIN_OWNED: usize = 8;

/// The most owned copies.
const MAX_OWNED: usize = 64;

/// Who writes a copy, and so how a count in it is added to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// The thread it belongs to, alone: added to by a load and a store.
    One,
    /// Threads that share it (those numbered after the owners), or anyone writing a value
    /// that is not striped: added to atomically.
    Many,
}

impl Writers {
    /// Adds `n` to `count`.
    #[inline]
    pub fn add(self, count: &AtomicU64, n: u64) {
        match self {
            Writers::One => count.store(count.load(Relaxed).wrapping_add(n), Relaxed),
            Writers::Many => {
                count.fetch_add(n, Relaxed);
            }
        }
    }
}

/// A value kept once per thread (see the module's docs).
pub struct Striped<T> {
    stripes: Box<[OnceLock<Box<Line<T>>>]>,
}

/// One copy, aligned so no other copy (or anything else) shares its cache lines. 128
/// bytes: x86's adjacent-line prefetch pairs lines, as `crossbeam_utils::CachePadded`
/// assumes.
#[repr(align(128))]
#[derive(Default)]
struct Line<T>(T);

impl<T: Default> Default for Striped<T> {
    fn default() -> Self {
        Striped {
            stripes: (0..stripes()).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl<T: Default> Striped<T> {
    /// This thread's copy, made on its first use.
    #[inline]
    pub fn local(&self) -> &T {
        self.local_numbered().1
    }

    /// This thread's copy and its number (below [`Striped::copies`]), for a value that
    /// names the copy it was made in ([`Striped::get`] finds it again).
    #[inline]
    pub fn local_numbered(&self) -> (usize, &T) {
        let (i, _) = self.index();
        (i, &self.stripes[i].get_or_init(Box::default).0)
    }

    /// This thread's copy, and who writes it: for counts, added to with
    /// [`Writers::add`].
    #[inline]
    pub fn local_counts(&self) -> (&T, Writers) {
        let (i, writers) = self.index();
        (&self.stripes[i].get_or_init(Box::default).0, writers)
    }

    /// This thread's copy's index: its own, or one it shares with the threads numbered
    /// after the owners.
    #[inline]
    fn index(&self) -> (usize, Writers) {
        let owned = self.owners();
        match thread_number() {
            n if n < owned => (n, Writers::One),
            n => (
                owned + (n - owned) % (self.stripes.len() - owned),
                Writers::Many,
            ),
        }
    }
}

impl<T> Striped<T> {
    /// Every copy made so far (a thread that never wrote has none).
    pub fn each(&self) -> impl Iterator<Item = &T> {
        self.stripes
            .iter()
            .filter_map(|s| s.get().map(|line| &line.0))
    }

    /// Copy number `i`, if a thread made it.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.stripes.get(i)?.get().map(|line| &line.0)
    }

    /// How many copies it can have: [`Striped::owners`] owned, the rest shared.
    pub fn copies(&self) -> usize {
        self.stripes.len()
    }

    /// How many threads own a copy (the first numbered).
    pub fn owners(&self) -> usize {
        owned()
    }

    /// One counter of the copies, added up.
    pub fn sum(&self, counter: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.each().map(|c| counter(c).load(Relaxed)).sum()
    }
}

/// How many threads own a copy: twice the cores, within [`MIN_OWNED`]..=[`MAX_OWNED`].
fn owned() -> usize {
    static OWNED: OnceLock<usize> = OnceLock::new();
    *OWNED.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (2 * cores).clamp(MIN_OWNED, MAX_OWNED)
    })
}

/// How many copies a striped value has: the owned ones, and a quarter as many (at least
/// two) for the threads numbered after their owners.
fn stripes() -> usize {
    owned() + (owned() / 4).max(2)
}

/// This thread's number, given on its first call. Never given again, so an owned copy
/// has one writer for good.
#[inline]
fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Relaxed);
    }
    NUMBER.with(|n| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_made_by_the_threads_that_write_and_sum_to_every_write() {
        let count: Striped<AtomicU64> = Striped::default();
        assert_eq!(count.each().count(), 0, "no copy before a write");
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        count.local().fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert_eq!(count.sum(|c| c), 8_000);
        let made = count.each().count();
        assert!((1..=8).contains(&made), "{made} copies for 8 threads");
    }

    #[test]
    fn a_thread_keeps_its_copy_and_copies_have_lines_of_their_own() {
        let count: Striped<AtomicU64> = Striped::default();
        let first: *const AtomicU64 = count.local();
        assert!(std::ptr::eq(first, count.local()), "the same copy twice");
        assert_eq!(first as usize % 128, 0, "a copy starts a line");
        assert!(std::mem::size_of::<Line<AtomicU64>>() >= 128);
        assert!(count.copies() > count.owners() && count.copies() <= MAX_STRIPES);
        assert!((MIN_OWNED..=MAX_OWNED).contains(&count.owners()));
    }

    #[test]
    fn more_threads_than_owned_copies_count_every_add_and_no_copy_has_two_owners() {
        let count: Striped<AtomicU64> = Striped::default();
        let owned = count.owners();
        // More than twice the copies: a mapping that gave two threads one owned copy would
        // give it to two of these, whichever numbers other tests' threads took meanwhile.
        let threads = 2 * count.copies() + 8;
        let seen: Vec<(usize, Writers)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..1_000 {
                            let (copy, writers) = count.local_counts();
                            writers.add(copy, 1);
                        }
                        let (i, _) = count.local_numbered();
                        (i, count.local_counts().1)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(count.sum(|c| c), threads as u64 * 1_000);
        // Numbers are never given twice: more threads than owned copies, so some share.
        let mut own: Vec<usize> = seen
            .iter()
            .filter(|(_, w)| *w == Writers::One)
            .map(|(i, _)| *i)
            .collect();
        let owners = own.len();
        own.sort_unstable();
        own.dedup();
        assert_eq!(own.len(), owners, "a copy with two owners: {seen:?}");
        assert!(owners <= owned && threads - owners >= 8, "{seen:?}");
        assert!(seen
            .iter()
            .all(|(i, w)| (*w == Writers::One) == (*i < owned) && *i < count.copies()));
    }

    #[test]
    fn a_count_added_by_its_one_writer_reads_as_an_atomic_add_would() {
        let count = AtomicU64::new(u64::MAX - 1);
        Writers::One.add(&count, 3);
        assert_eq!(count.load(Relaxed), 1, "wraps as fetch_add does");
        Writers::Many.add(&count, 2);
        assert_eq!(count.load(Relaxed), 3);
    }
}
