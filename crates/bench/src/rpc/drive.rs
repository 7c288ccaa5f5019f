//! One measured cell: `concurrency` loops calling one system for a while, after a short
//! warm-up, with latency from a histogram per thread and the process's CPU time and
//! allocations read around the measured part only (the warm-up's connection set-up and
//! first-touch allocations would otherwise be charged to the steady state).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::core::latency::Latency;
use axle::core::striped::Striped;

use super::Row;
use crate::{alloc_count, cpu};

/// What one cell is: the system, its payload and concurrency, how long it runs.
#[derive(Clone, Copy, Debug)]
pub struct Cell<'a> {
    pub system: &'a str,
    pub payload_bytes: usize,
    pub concurrency: usize,
    pub duration: Duration,
    pub warm_up: Duration,
}

/// Runs `cell`: warm-up, then `concurrency` loops calling `call` for `cell.duration`.
///
/// Each loop awaits `call()`'s future in place, as a caller's own task would: a box per
/// call would charge every system for the harness's allocator, by its future's size
/// (`docs/performance.md`, "The bench loop's own box").
pub(crate) async fn drive<F, Fut>(cell: Cell<'_>, call: F) -> Row
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    drive_into(cell, &Latency::default(), move || call.clone()).await
}

/// [`drive`], with a call of each loop's own (`new_loop` makes one per loop), also adding
/// the cell's latencies to `merged` (one system's rounds of one cell share it, so their
/// percentiles are read over every round).
pub(crate) async fn drive_into<L, F, Fut>(cell: Cell<'_>, merged: &Latency, new_loop: L) -> Row
where
    L: Fn() -> F + Send + Sync,
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    warm(&new_loop, cell.concurrency, cell.warm_up).await;
    let stop = Arc::new(AtomicBool::new(false));
    // One histogram per thread, not per loop: a loop's task moves between the runtime's
    // workers, and a histogram of its own went with it, its lines fetched from the other
    // core's cache on the record after a move. A system whose requests touch more memory
    // evicted them more often, so the harness charged it more (`docs/performance.md`,
    // "The harness's own recording").
    let hist = Arc::new(Striped::<Latency>::default());
    let errors = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu::process_cpu();
    let allocs_before = alloc_count::process_allocations();
    let started = Instant::now();
    let tasks: Vec<_> = (0..cell.concurrency)
        .map(|_| {
            let call = new_loop();
            let (stop, hist, errors) = (stop.clone(), hist.clone(), errors.clone());
            tokio::spawn(async move {
                while !stop.load(Relaxed) {
                    let t = Instant::now();
                    if call().await {
                        let (hist, writers) = hist.local_counts();
                        hist.record_by(t.elapsed().as_nanos() as u64, writers);
                    } else {
                        errors.fetch_add(1, Relaxed);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(cell.duration).await;
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let hist = Latency::merged(hist.each());
    merged.merge(&hist);
    let h = hist.snapshot();
    let per_request = |delta: f64| delta / (h.count.max(1) as f64);
    let cpu_us_per_req = match (cpu_before, cpu::process_cpu()) {
        (Some(before), Some(after)) => Some(per_request(
            after.saturating_sub(before).as_secs_f64() * 1e6,
        )),
        _ => None,
    };
    let allocs_per_req = match (allocs_before, alloc_count::process_allocations()) {
        (Some(before), Some(after)) => Some(per_request(after.saturating_sub(before) as f64)),
        _ => None,
    };
    Row {
        system: cell.system.to_string(),
        concurrency: cell.concurrency,
        requests: h.count,
        errors: errors.load(Relaxed),
        req_per_s: h.count as f64 / elapsed,
        seconds: elapsed,
        p50_us: h.p50_ns as f64 / 1000.0,
        p99_us: h.p99_ns as f64 / 1000.0,
        payload_bytes: cell.payload_bytes,
        cpu_us_per_req,
        allocs_per_req,
    }
}

async fn warm<L, F, Fut>(new_loop: &L, concurrency: usize, d: Duration)
where
    L: Fn() -> F,
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let until = Instant::now() + d;
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let call = new_loop();
            tokio::spawn(async move {
                while Instant::now() < until {
                    call().await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call the loops made is in the row, as a request or an error, whichever
    /// worker thread recorded it: the loops yield in every call, so the runtime's two
    /// workers may each run them and write their own thread's histogram (a cell that
    /// read one thread's alone fails here, tried by hand).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_is_counted_once_whichever_thread_recorded_it() {
        let made = Arc::new(AtomicU64::new(0));
        let counted = made.clone();
        let call = move || {
            let n = counted.fetch_add(1, Relaxed);
            async move {
                tokio::task::yield_now().await;
                !n.is_multiple_of(5)
            }
        };
        let cell = Cell {
            system: "test",
            payload_bytes: 0,
            concurrency: 8,
            duration: Duration::from_millis(100),
            // No warm-up: every call made is a measured one.
            warm_up: Duration::ZERO,
        };
        let merged = Latency::default();
        let row = drive_into(cell, &merged, move || call.clone()).await;
        let made = made.load(Relaxed);
        assert!(row.requests > 0 && row.errors > 0, "{row:?}");
        assert_eq!(row.requests + row.errors, made);
        assert_eq!(merged.snapshot().count, row.requests);
        assert!(row.p99_us >= row.p50_us && row.p50_us > 0.0, "{row:?}");
    }
}
