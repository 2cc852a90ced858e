//! The user's data folder (`$XDG_DATA_HOME/rmsweb`, else `~/.local/share/rmsweb`)
//! and the working copy of the bundled fixtures kept there, so that annotations
//! and runs made on the bundled dataset never land in the source tree.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// `$XDG_DATA_HOME/rmsweb` (an absolute value only, as the spec says), else
/// `$HOME/.local/share/rmsweb`; None without either.
pub fn data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".local").join("share"))
    })?;
    Some(base.join("rmsweb"))
}

/// Where the working copy of the bundled fixtures lives.
pub fn fixtures_copy_dir() -> Option<PathBuf> {
    data_dir().map(|d| d.join("fixtures"))
}

/// Whether `root` is the working copy of the bundled fixtures.
pub fn is_fixtures_copy(root: &Path) -> bool {
    fixtures_copy_dir().is_some_and(|c| root == c)
}

/// Marks which rmsweb version last refreshed a copy.
const STAMP: &str = ".rmsweb-fixtures-version";

/// Makes `dest` a working copy of the bundled dataset at `src`: on first use every
/// file is copied; when rmsweb's version changed the bundled files are copied over
/// again. Files that exist only in `dest` (annotations, launched runs) are never
/// touched. Returns `dest`.
pub fn refresh_copy(src: &Path, dest: &Path) -> anyhow::Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let stamp = dest.join(STAMP);
    let current = std::fs::read_to_string(&stamp).ok();
    if current.as_deref().map(str::trim) != Some(version) {
        copy_tree(src, dest)?;
        std::fs::write(&stamp, format!("{version}\n"))
            .with_context(|| format!("writing {}", stamp.display()))?;
    }
    Ok(dest.to_path_buf())
}

/// Copies the regular files and folders under `src` into `dest` (links and other
/// special files are skipped).
fn copy_tree(src: &Path, dest: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    for entry in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let entry = entry?;
        let t = entry.file_type()?;
        let to = dest.join(entry.file_name());
        if t.is_dir() {
            copy_tree(&entry.path(), &to)?;
        } else if t.is_file() {
            std::fs::copy(entry.path(), &to).with_context(|| {
                format!("copying {} to {}", entry.path().display(), to.display())
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_copies_the_bundled_files_and_keeps_the_users_own() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("mined")).unwrap();
        std::fs::write(src.path().join("dataset.toml"), "v1").unwrap();
        std::fs::write(src.path().join("mined/pairs.jsonl"), "{}").unwrap();
        let home = tempfile::tempdir().unwrap();
        let dest = home.path().join("fixtures");
        refresh_copy(src.path(), &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("dataset.toml")).unwrap(),
            "v1"
        );
        assert!(dest.join("mined/pairs.jsonl").is_file());
        // The user's annotations stay; the same version copies nothing again.
        std::fs::write(dest.join("annotations.jsonl"), "mine").unwrap();
        std::fs::write(src.path().join("dataset.toml"), "v2").unwrap();
        refresh_copy(src.path(), &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("dataset.toml")).unwrap(),
            "v1"
        );
        // Another version refreshes the bundled files only.
        std::fs::write(dest.join(STAMP), "0.0.0\n").unwrap();
        refresh_copy(src.path(), &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("dataset.toml")).unwrap(),
            "v2"
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("annotations.jsonl")).unwrap(),
            "mine"
        );
    }
}
