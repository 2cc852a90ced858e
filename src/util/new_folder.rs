//! A folder that appears whole or not at all: its files are written into a temporary
//! sibling (`.NAME.TAG-XXXXXX.tmp`), synced, then renamed into place. The destination
//! must not exist or be an empty folder: nothing existing is overwritten or deleted.
//! An error (or a drop before [`NewFolder::finish`]) removes the temporary folder; an
//! interrupted process leaves only it, its name saying what it is.

use super::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, ensure};
use std::path::{Path, PathBuf};

/// The temporary side of a folder being written (see the module docs).
pub struct NewFolder {
    tmp: tempfile::TempDir,
    out: PathBuf,
    parent: PathBuf,
}

impl NewFolder {
    /// Checks that `out` may be written (absent, or an empty folder; its parent a
    /// folder) and creates the temporary folder beside it, named after `tag` (what is
    /// writing it, e.g. `gguf-import`).
    pub fn create(out: &Path, tag: &str) -> Result<Self> {
        let label = clean_line(&out.display().to_string()).into_owned();
        match std::fs::symlink_metadata(out) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("{label}: checking --out")),
            Ok(m) => {
                let empty_dir = m.is_dir()
                    && std::fs::read_dir(out)
                        .with_context(|| format!("{label}: listing --out"))?
                        .next()
                        .is_none();
                ensure!(
                    empty_dir,
                    "{label}: --out already exists and is not an empty folder; refusing to \
                     overwrite it (choose another folder or remove it yourself)"
                );
            }
        }
        let name = out
            .file_name()
            .ok_or_else(|| anyhow!("{label}: --out must name a folder"))?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        ensure!(
            parent.is_dir(),
            "{}: the folder --out goes into does not exist",
            clean_line(&parent.display().to_string())
        );
        let prefix = format!(".{name}.{tag}-");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // 0777 less the umask, as any new folder (tempdir's default, 0700, would
            // leave the folder private to its owner).
            b.permissions(std::fs::Permissions::from_mode(0o777));
        }
        let tmp = b
            .tempdir_in(&parent)
            .with_context(|| format!("creating a temporary folder in {}", parent.display()))?;
        Ok(NewFolder {
            tmp,
            out: out.to_path_buf(),
            parent,
        })
    }

    /// Where to write the files.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// The folder `out` goes into (for other temporary files of the same write).
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Syncs the files and renames the folder to its destination.
    pub fn finish(self) -> Result<()> {
        let label = clean_line(&self.out.display().to_string()).into_owned();
        for e in std::fs::read_dir(self.tmp.path())? {
            let e = e?;
            if e.file_type()?.is_file() {
                std::fs::File::open(e.path())?.sync_all()?;
            }
        }
        sync_dir(self.tmp.path())?;
        let tmp_path = self.tmp.keep();
        if let Err(e) = std::fs::rename(&tmp_path, &self.out) {
            std::fs::remove_dir_all(&tmp_path).ok();
            return Err(e)
                .with_context(|| format!("{label}: renaming the finished folder into place"));
        }
        sync_dir(&self.parent).ok();
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_appears_whole_or_not_at_all_and_nothing_existing_is_touched() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("m");
        let f = NewFolder::create(&out, "test").unwrap();
        std::fs::write(f.path().join("a.txt"), "x").unwrap();
        assert!(!out.exists(), "visible before finish");
        f.finish().unwrap();
        assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "x");
        // An existing non-empty folder (or a file) is refused and left as it was.
        let e = NewFolder::create(&out, "test").err().unwrap();
        assert!(format!("{e:#}").contains("not an empty folder"), "{e:#}");
        assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "x");
        // Dropped before finishing: nothing is left behind.
        let other = d.path().join("n");
        let f = NewFolder::create(&other, "test").unwrap();
        std::fs::write(f.path().join("b.txt"), "y").unwrap();
        drop(f);
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only `m` remains");
        // An empty folder may be the destination.
        std::fs::create_dir(&other).unwrap();
        NewFolder::create(&other, "test").unwrap().finish().unwrap();
        assert!(other.is_dir());
    }
}
