//! Process settings that make CPU training fast on small machines.
//!
//! Both were found with `perf` on the tiny preset (2 cores, see the `sft_tiny` bench):
//! - glibc serves blocks above its mmap threshold with fresh `mmap`s and returns them
//!   with `munmap`, so every multi-megabyte tensor of a step cost page faults, page
//!   clearing and TLB shootdowns (a quarter of the CPU time). [`keep_tensor_memory`]
//!   raises the thresholds so glibc reuses the memory.
//! - candle's elementwise thread pool spins for a while after each op, on a core
//!   that the matrix multiplications' rayon pool needs next (8 % of the CPU time).
//!   [`quiet_idle_workers`] shortens the spin.

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

/// Sets `CANDLE_BARRIER_POOL_SPIN_LIMIT` (unless the user set it) so idle candle
/// workers park quickly instead of spinning.
///
/// # Safety
/// Changes the environment: call it first thing in `main`, before any other thread
/// exists (and before candle's pool starts, which reads the variable once).
pub unsafe fn quiet_idle_workers() {
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", WORKER_SPIN_LIMIT) };
    }
}
