//! Thread CPU time for the benchmarks' own figures.

/// Thread CPU time in seconds: unlike wall time it does not count the time this
/// thread waits for a core, so the figure is per core even on a loaded machine.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The least thread CPU time, in seconds, of `runs` calls of `f` (at least one), and
/// the last call's result.
pub fn best_cpu_seconds<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..runs.max(1) {
        let start = thread_cpu_seconds();
        let out = f();
        best = best.min(thread_cpu_seconds() - start);
        last = Some(out);
    }
    (best, last.expect("at least one run"))
}
