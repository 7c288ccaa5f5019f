//! A counting global allocator. A global allocator is process-wide, so this crate only
//! defines it: a binary that wants allocation counts installs it (`axle` built with the
//! `count-allocs` feature, the bench crate's own tests), and every other build keeps the
//! system allocator untouched. Counts are kept twice: for the process (an atomic, what a
//! whole run costs) and per thread (a plain cell, so a client driven on one thread can be
//! counted without the server's allocations on the others).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The system allocator, counting every allocation (and reallocation) it serves.
pub struct CountingAlloc;

static TOTAL: AtomicU64 = AtomicU64::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialised and without a destructor: safe to touch from inside the allocator.
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    TOTAL.fetch_add(1, Relaxed);
    // `try_with`: a thread being torn down has no slot left; its allocations still count
    // in the total.
    let _ = THREAD.try_with(|c| c.set(c.get() + 1));
    if !INSTALLED.load(Relaxed) {
        INSTALLED.store(true, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches no memory the
// allocator hands out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations the whole process has made so far; `None` when [`CountingAlloc`] is not
/// the global allocator (nothing has been counted).
pub fn process_allocations() -> Option<u64> {
    INSTALLED.load(Relaxed).then(|| TOTAL.load(Relaxed))
}

/// Allocations the calling thread has made so far; `None` when [`CountingAlloc`] is not
/// the global allocator.
pub fn thread_allocations() -> Option<u64> {
    INSTALLED.load(Relaxed).then(|| THREAD.with(Cell::get))
}
