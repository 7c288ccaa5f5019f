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
//! Threads are numbered in the order they first write any striped value, and a thread
//! writes the copy its number picks. There are at least twice as many copies as the
//! machine has cores (at most [`MAX_STRIPES`]), so a runtime's workers each get their own
//! unless threads that wrote once and left took their numbers; two threads that share a
//! copy still count right (every copy is written with atomics), they only wait for each
//! other as every thread did before.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

/// The most copies a striped value keeps (each made only when a thread writes it).
pub const MAX_STRIPES: usize = 64;

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
        let i = thread_number() & (self.stripes.len() - 1);
        (i, &self.stripes[i].get_or_init(Box::default).0)
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

    /// How many copies it can have (one per thread number, modulo this).
    pub fn copies(&self) -> usize {
        self.stripes.len()
    }

    /// One counter of the copies, added up.
    pub fn sum(&self, counter: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.each().map(|c| counter(c).load(Relaxed)).sum()
    }
}

/// How many copies a striped value has: twice the cores, as a power of two.
fn stripes() -> usize {
    static STRIPES: OnceLock<usize> = OnceLock::new();
    *STRIPES.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (2 * cores).next_power_of_two().min(MAX_STRIPES)
    })
}

/// This thread's number, given on its first call.
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
        assert!(count.stripes.len().is_power_of_two());
        assert!(count.stripes.len() <= MAX_STRIPES);
    }
}
