//! Exclusive file locks that say what they wait for: when another process holds the
//! lock for more than [`NOTICE_AFTER`], a line on standard error names the file and
//! why it is locked, so a waiting command never looks hung.

use std::fs::{File, TryLockError};
use std::time::{Duration, Instant};

/// How long a lock is waited for silently.
pub const NOTICE_AFTER: Duration = Duration::from_secs(2);

/// Takes an exclusive lock on `file`, waiting as long as it takes. After
/// [`NOTICE_AFTER`], `notice` is called once with how long it has waited (the
/// caller says what is locked; see [`stderr_notice`]).
pub fn lock_exclusive(file: &File, mut notice: impl FnMut(Duration)) -> std::io::Result<()> {
    let start = Instant::now();
    let mut told = false;
    let mut pause = Duration::from_millis(5);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::Error(e)) => return Err(e),
            Err(TryLockError::WouldBlock) => {}
        }
        let waited = start.elapsed();
        if !told && waited >= NOTICE_AFTER {
            notice(waited);
            told = true;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// A notice for [`lock_exclusive`] that prints, once, `waiting for WHAT (locked by
/// another rmsweb process)…` to standard error, cleaned of control characters.
pub fn stderr_notice(what: &str) -> impl FnMut(Duration) + '_ {
    move |waited| {
        eprintln!(
            "waiting for {} (locked by another rmsweb process for {:.0} s; it goes on when that one finishes)…",
            super::sanitize::clean_line(what),
            waited.as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_waited_for_with_one_notice() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        std::fs::write(&p, "").unwrap();
        let holder = File::open(&p).unwrap();
        holder.lock().unwrap();
        let waiter = File::open(&p).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(NOTICE_AFTER + Duration::from_millis(300));
            holder.unlock().unwrap();
        });
        let mut notices = Vec::new();
        lock_exclusive(&waiter, |w| notices.push(w)).unwrap();
        release.join().unwrap();
        assert_eq!(notices.len(), 1);
        assert!(notices[0] >= NOTICE_AFTER);
        // A free lock is taken without a notice.
        waiter.unlock().unwrap();
        lock_exclusive(&waiter, |_| panic!("no notice for a free lock")).unwrap();
    }
}
