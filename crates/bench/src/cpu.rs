//! CPU time of the whole process (user + system, every thread), read around a measured
//! run. Client, server and runtime all run in this process, so a run's delta divided by
//! its requests is what one request costs both ends together — the figure a CPU-bound
//! deployment pays for, which req/s alone hides when a system idles between requests.

use std::time::Duration;

/// User + system CPU time this process has used so far (`getrusage(RUSAGE_SELF)`,
/// microsecond resolution), or `None` where the call fails.
pub fn process_cpu() -> Option<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: zero-initialised and, on success, filled by the kernel.
    let usage = unsafe { usage.assume_init() };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some(Duration::from_micros(
        micros(usage.ru_utime) + micros(usage.ru_stime),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu().expect("getrusage");
        // Spin until the clock has moved by more than its resolution.
        let mut x = 0u64;
        while process_cpu().expect("getrusage") <= before + Duration::from_millis(5) {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert!(process_cpu().unwrap() > before);
    }
}
