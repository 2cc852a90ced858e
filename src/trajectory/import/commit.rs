//! All-or-nothing writes into a dataset: every change made is remembered so that a
//! failure part-way can put the folder back exactly as it was.

use crate::trajectory::jsonl;
use anyhow::{Context, Result};
use serde::Serialize;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// The changes made so far; [`Journal::undo`] reverts them in reverse order.
#[derive(Debug, Default)]
pub struct Journal {
    undo: Vec<Undo>,
}

#[derive(Debug)]
enum Undo {
    /// A folder this import created: removed if empty (what the import put in it is
    /// undone first; anything else found there is left alone and reported).
    CreatedDir(PathBuf),
    /// A file this import created: removed.
    Created(PathBuf),
    /// A JSON Lines file: cut back to its complete lines (this length), then its
    /// torn last line (which the append removed, see [`jsonl::append`]) put back.
    Appended {
        path: PathBuf,
        complete: u64,
        torn_tail: Vec<u8>,
    },
    /// A folder renamed into place: removed.
    Renamed(PathBuf),
}

impl Journal {
    /// Creates `dir` (and missing parents up to an existing one), remembering what
    /// it created.
    pub fn create_dir_all(&mut self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            if d.as_os_str().is_empty() || d.exists() {
                break;
            }
            missing.push(d.to_path_buf());
            cur = d.parent();
        }
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(&d) {
                Ok(()) => self.undo.push(Undo::CreatedDir(d)),
                // A concurrent import created it first: it is not ours to undo.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e).with_context(|| format!("creating {}", d.display())),
            }
        }
        Ok(())
    }

    /// Notes that `path` is about to be created by someone else (e.g. `dataset.toml`
    /// by `Dataset::create`) if it does not exist yet.
    pub fn will_create(&mut self, path: &Path) {
        if !path.exists() {
            self.undo.push(Undo::Created(path.to_path_buf()));
        }
    }

    /// Appends records to a JSON Lines file (one locked, fsynced write).
    pub fn append<T: Serialize>(&mut self, path: &Path, records: &[T]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if path.exists() {
            let (complete, torn_tail) =
                torn_tail_of(path).with_context(|| format!("reading {}", path.display()))?;
            self.undo.push(Undo::Appended {
                path: path.to_path_buf(),
                complete,
                torn_tail,
            });
        } else {
            self.undo.push(Undo::Created(path.to_path_buf()));
        }
        jsonl::append(path, records)?;
        Ok(())
    }

    /// Renames a staged folder into place; refuses to replace anything.
    pub fn rename_dir(&mut self, from: &Path, to: &Path) -> Result<()> {
        if to.exists() {
            anyhow::bail!("{} already exists; refusing to overwrite it", to.display());
        }
        std::fs::rename(from, to)
            .with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
        self.undo.push(Undo::Renamed(to.to_path_buf()));
        Ok(())
    }

    /// Reverts every change, newest first. Errors are collected, not stopped at.
    pub fn undo(self) -> Vec<String> {
        let mut problems = Vec::new();
        for u in self.undo.into_iter().rev() {
            let r = match &u {
                Undo::CreatedDir(p) => match std::fs::remove_dir(p) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    r => r,
                },
                Undo::Created(p) | Undo::Renamed(p) => remove_any(p),
                Undo::Appended {
                    path,
                    complete,
                    torn_tail,
                } => OpenOptions::new().write(true).open(path).and_then(|mut f| {
                    use std::io::{Seek, SeekFrom, Write};
                    f.set_len(*complete)?;
                    f.seek(SeekFrom::End(0))?;
                    f.write_all(torn_tail)?;
                    f.sync_all()
                }),
            };
            if let Err(e) = r {
                problems.push(format!("undoing {u:?}: {e}"));
            }
        }
        problems
    }
}

/// The length of a file's complete lines and the bytes after its last newline,
/// read backwards from the end (the file may be large; the tail is small).
fn torn_tail_of(path: &Path) -> std::io::Result<(u64, Vec<u8>)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &chunk[..n]) {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    let mut tail = Vec::with_capacity((len - end) as usize);
    f.seek(SeekFrom::Start(end))?;
    f.take(len - end).read_to_end(&mut tail)?;
    Ok((end, tail))
}

fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Takes an exclusive lock on the dataset folder itself (no lock file is left
/// behind), so that two imports into one dataset run one after the other and never
/// hand out the same attempt number. Released when the returned handle drops. When
/// another import holds it for more than two seconds, a line on standard error says
/// what this one waits for.
pub fn lock_dataset(dir: &Path) -> Result<std::fs::File> {
    let f = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    let what = format!(
        "the dataset {} (another import is writing to it)",
        dir.display()
    );
    crate::util::lock::lock_exclusive(&f, crate::util::lock::stderr_notice(&what))
        .with_context(|| format!("locking {}", dir.display()))?;
    Ok(f)
}

/// Prefix of an import's staging folder inside the dataset.
pub const STAGING_PREFIX: &str = ".import-";

/// The staging folders (`.import-*/`) directly inside `dir`.
pub fn staging_folders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(STAGING_PREFIX))
        // Not followed: a link named like a staging folder is not one.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Removes the staging folders an import that died left in `dir` (call it holding
/// the dataset lock: then no live import owns one). Returns one line per folder,
/// saying what was removed or why it could not be.
pub fn remove_stale_staging(dir: &Path) -> Vec<String> {
    staging_folders(dir)
        .into_iter()
        .map(|p| match std::fs::remove_dir_all(&p) {
            Ok(()) => format!(
                "{}: removed the staging folder of an interrupted import",
                p.display()
            ),
            Err(e) => format!(
                "{}: staging folder of an interrupted import could not be removed: {e}",
                p.display()
            ),
        })
        .collect()
}

/// Fsyncs a folder so renames into it survive a crash (best effort).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        d.sync_all().ok();
    }
}
