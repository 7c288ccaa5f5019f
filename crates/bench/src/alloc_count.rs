//! A counting global allocator. A global allocator is process-wide, so this crate only
//! defines it: a binary that wants allocation counts installs it (`axle` built with the
//! `count-allocs` feature, the bench crate's own tests), and every other build keeps the
//! system allocator untouched. Counts are kept twice: for the process (an atomic, what a
//! whole run costs) and per thread (a plain cell, so a client driven on one thread can be
//! counted without the server's allocations on the others).

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The system allocator, counting every allocation (and reallocation) it serves.
pub struct CountingAlloc;

static TOTAL: AtomicU64 = AtomicU64::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialised and without a destructor: safe to touch from inside the allocator.
    static THREAD: Cell<u64> = const { Cell::new(0) };
    // Whether this thread's allocations are being traced (`trace_sites`), and whether
    // the allocator is inside its own tracing (whose allocations are neither counted nor
    // traced).
    static TRACING: Cell<bool> = const { Cell::new(false) };
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
}

/// The traced thread's allocations, one unresolved backtrace each.
static SITES: Mutex<Vec<Backtrace>> = Mutex::new(Vec::new());

fn count() {
    if IN_TRACE.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    if TRACING.try_with(Cell::get).unwrap_or(false) {
        IN_TRACE.with(|t| t.set(true));
        let site = Backtrace::force_capture();
        if let Ok(mut sites) = SITES.lock() {
            sites.push(site);
        }
        IN_TRACE.with(|t| t.set(false));
    }
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

/// Starts tracing the calling thread's allocations: a backtrace each, taken inside the
/// allocator (so slow: for finding allocation sites, never for measuring speed), until
/// [`trace_stop`].
pub fn trace_start() {
    SITES.lock().map(|mut s| s.clear()).ok();
    TRACING.with(|t| t.set(true));
}

/// Stops tracing and returns the backtraces taken since [`trace_start`], in order.
pub fn trace_stop() -> Vec<Backtrace> {
    TRACING.with(|t| t.set(false));
    SITES
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

/// A backtrace cut to the frames that say where an allocation came from: the
/// allocator's own frames and the runtime below the test are left out, at most `depth`
/// frames kept, one symbol name per line.
pub fn site_frames(site: &Backtrace, depth: usize) -> String {
    let text = site.to_string();
    let names = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("at "))
        .filter_map(|l| l.split_once(": ").map(|(_, name)| name));
    let skip = |n: &str| {
        n.contains("alloc_count")
            || n.contains("std::backtrace")
            || n.starts_with("__rust")
            || n.starts_with("__rdl")
            || n.starts_with("alloc::alloc::")
            || n.starts_with("<axle_bench::alloc_count")
    };
    let kept: Vec<&str> = names
        .skip_while(|n| !skip(n))
        .skip_while(|n| skip(n))
        .take(depth)
        .collect();
    kept.join("\n")
}
