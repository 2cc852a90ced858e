//! Storage: every stage reads and writes files through here.
//!
//! - Opening input files without blocking: only regular files are read. A FIFO would
//!   block the open (and then the dataset lock) until a writer came, a device such as
//!   `/dev/zero` never ends; both are refused with a message naming what the path is.
//! - [`write_atomic`]: a file written whole or not at all.
//! - [`resolve_inside`]: an untrusted relative path kept inside its root.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path};

/// What kind of file a path is, for messages (`a FIFO`, `a character device`, ...).
fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn not_regular(t: std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} where a regular file was expected", kind_name(t)),
    )
}

/// Opens with `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer),
/// refuses anything but a regular file, then clears `O_NONBLOCK` again.
fn open_checked(opts: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let f = opts.custom_flags(libc::O_NONBLOCK).open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        return Err(not_regular(t));
    }
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL touch only its flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}

/// Opens `path` for reading if it is a regular file (following links).
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_checked(OpenOptions::new().read(true), path)
}

/// Opens (creating) `path` for reading and writing if it is, or will be, a regular file.
pub fn open_regular_rw(path: &Path) -> io::Result<File> {
    open_checked(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
        path,
    )
}

/// Whether `path` names something other than a regular file (a missing path is not).
pub fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.file_type().is_file() && !m.is_dir())
}

/// Reads a whole regular file, refusing one over `max` bytes before reading it (and
/// one that grows past `max` while read). Errors name the path.
pub fn read_limited(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let f = open_regular(path).map_err(named)?;
    let len = f.metadata().map_err(named)?.len();
    let too_big = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {what} the {} limit",
                path.display(),
                super::human_bytes(max)
            ),
        )
    };
    if len > max {
        return Err(too_big(&format!("{} is over", super::human_bytes(len))));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(max + 1).read_to_end(&mut buf).map_err(named)?;
    if buf.len() as u64 > max {
        return Err(too_big("grew past"));
    }
    Ok(buf)
}

/// Largest configuration file read (`recipe.toml`, `mine.toml`, a filter or reward
/// config): a hand-written file is never near this.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Largest machine-written JSON or TOML file read outside the dataset store (a
/// recipe's stage records, a run's `status.json` or `run.toml`, evaluation reports).
pub const MAX_RECORD_FILE_BYTES: u64 = 64 << 20;

/// A configuration file as text: [`read_text_limited`] at [`MAX_CONFIG_BYTES`].
pub fn read_config(path: &Path) -> io::Result<String> {
    read_text_limited(path, MAX_CONFIG_BYTES)
}

/// A machine-written record file as text: [`read_text_limited`] at
/// [`MAX_RECORD_FILE_BYTES`].
pub fn read_record(path: &Path) -> io::Result<String> {
    read_text_limited(path, MAX_RECORD_FILE_BYTES)
}

/// The last `max` bytes of a regular file as text (invalid UTF-8 replaced), for
/// the tail of a log that may be any size.
pub fn read_tail(path: &Path, max: u64) -> io::Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = open_regular(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut buf = Vec::new();
    f.take(max).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The number of lines of a regular file, read in pieces (any size).
pub fn count_lines(path: &Path) -> io::Result<usize> {
    let mut f = open_regular(path)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut n = 0;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        n += buf[..k].iter().filter(|&&b| b == b'\n').count();
    }
}

/// [`read_limited`] as UTF-8 text.
pub fn read_text_limited(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_limited(path, max)?).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: not UTF-8 text (byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// A temporary file in `dir` created with mode 0666 less the umask, as any new file
/// (tempfile's default, 0600, would leave every output file private to its owner).
fn temp_file_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let mut b = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b.tempfile_in(dir)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync,
/// rename, then fsync of the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp =
        temp_file_in(dir).with_context(|| format!("temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("renaming into {}", path.display()))?;
    if let Ok(d) = File::open(dir) {
        d.sync_all().ok();
    }
    Ok(())
}

/// Resolves `rel` inside `root`, refusing absolute paths, `..` and anything that
/// (through symlinks) lands outside the root.
pub fn resolve_inside(root: &Path, rel: &str) -> anyhow::Result<std::path::PathBuf> {
    resolve_under(root, rel, "the dataset root")
}

/// [`resolve_inside`] for a root messages call `what` (`the history's folder`).
pub fn resolve_under(root: &Path, rel: &str, what: &str) -> anyhow::Result<std::path::PathBuf> {
    let p = Path::new(rel);
    if rel.is_empty() {
        anyhow::bail!("empty path");
    }
    let shown = crate::util::sanitize::excerpt(rel);
    if p.is_absolute() || rel.starts_with('\\') || rel.contains(':') && cfg!(windows) {
        anyhow::bail!("path `{shown}` is absolute; it must be relative to {what}");
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => anyhow::bail!("path `{shown}` leaves {what}"),
        }
    }
    let joined = root.join(p);
    if joined.exists() {
        let real = joined.canonicalize()?;
        let real_root = root.canonicalize()?;
        if !real.starts_with(&real_root) {
            anyhow::bail!("path `{shown}` leads outside {what} through a link");
        }
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn atomic_writes_get_the_mode_of_any_new_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        // A file created plainly gets 0666 less the umask; so must an atomic write.
        let plain = d.path().join("plain");
        File::create(&plain).unwrap();
        let atomic = d.path().join("atomic.json");
        write_atomic(&atomic, b"{}").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
        assert_eq!(std::fs::read(&atomic).unwrap(), b"{}");
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = open_regular_rw(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_limited(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            e.to_string().contains("/dev/zero: a character device"),
            "{e}"
        );
        assert!(is_special(Path::new("/dev/null")));
        let e = open_regular(dir.path()).unwrap_err();
        assert!(e.to_string().contains("folder"), "{e}");
    }

    #[test]
    fn regular_files_are_read_within_their_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "hello").unwrap();
        assert_eq!(read_text_limited(&p, 5).unwrap(), "hello");
        let e = read_limited(&p, 4).unwrap_err();
        assert!(e.to_string().contains("over the 4 B limit"), "{e}");
        std::fs::write(&p, b"\xff\xfe").unwrap();
        assert!(
            read_text_limited(&p, 5)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
