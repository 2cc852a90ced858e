//! Process settings that make CPU training fast on small machines.
//!
//! Both were found with `perf` on the tiny preset (2 cores, see the `sft_tiny` bench):
//! - glibc serves blocks above its mmap threshold with fresh `mmap`s and returns them
//!   with `munmap`, so every multi-megabyte tensor of a step cost page faults, page
//!   clearing and TLB shootdowns (a quarter of the CPU time). [`keep_tensor_memory`]
//!   raises the thresholds so glibc reuses the memory.
//! - candle's elementwise thread pool spins for a while after each op, on a core
//!   that the matrix multiplications' rayon pool needs next (8 % of the CPU time).
//!   [`configure_thread_pools`] shortens the spin (and fixes the thread count).

/// Largest block glibc serves from its heap when asked (its cap on 64-bit).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Spin iterations of an idle candle pool worker before it parks (candle: 25 000).
const WORKER_SPIN_LIMIT: &str = "50";

/// Tunes the allocator for training (idempotent; a no-op outside glibc).
pub fn keep_tensor_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only changes allocator parameters; valid constants.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
                libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
                libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            }
        });
    }
}

/// Sets candle's thread-pool variables the user has not set: a short idle spin
/// (`CANDLE_BARRIER_POOL_SPIN_LIMIT`, so workers park instead of spinning) and the
/// thread count (`RAYON_NUM_THREADS`, [`pool_threads`] computed once: without
/// it candle re-reads `/proc/cpuinfo` on every matrix multiplication, 7 % of an RL
/// step's CPU time, mostly in token-by-token sampling).
///
/// # Safety
/// Changes the environment: call it first thing in `main`, before any other thread
/// exists (and before candle's pools start, which read the variables).
pub unsafe fn configure_thread_pools() {
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", WORKER_SPIN_LIMIT) };
    }
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let available = std::thread::available_parallelism().ok().map(usize::from);
        let n = pool_threads(candle_core::utils::get_num_threads(), available);
        // SAFETY: as above.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
}

/// Threads for candle's pools when the user sets none: candle's own default, the
/// physical cores `/proc/cpuinfo` lists (in a container, the host's), capped by the
/// CPUs this process may use (`available`: its affinity mask and cgroup CPU quota, as
/// `std::thread::available_parallelism` reads them). Uncapped, a container given 16 of
/// a large host's cores starts a thread per host core, and candle's pools spin while
/// they wait: the likely cause of what the lent H200 machine (16 cores by `nproc`)
/// showed, 2 tiny SFT steps unfinished after 25 s at the default count, 5 s at 4.
pub fn pool_threads(candle_default: usize, available: Option<usize>) -> usize {
    available
        .map_or(candle_default, |a| candle_default.min(a))
        .max(1)
}

/// The thread count candle's CPU kernels use (after [`configure_thread_pools`]).
pub fn cpu_threads() -> usize {
    candle_core::utils::get_num_threads()
}

#[cfg(test)]
mod tests {
    use super::pool_threads;

    #[test]
    fn pool_threads_never_exceed_the_usable_cpus() {
        // A container with 16 CPUs of a host whose /proc/cpuinfo lists 96 cores.
        assert_eq!(pool_threads(96, Some(16)), 16);
        // Fewer physical cores than usable logical CPUs: candle's count stands.
        assert_eq!(pool_threads(8, Some(16)), 8);
        // Unknown: candle's count; never zero.
        assert_eq!(pool_threads(8, None), 8);
        assert_eq!(pool_threads(0, None), 1);
    }
}
