//! A recipe folder belongs to `rmsweb recipe run`: it carries a marker file
//! ([`MARKER_FILE`]) written when the run made the folder (or found it empty), and
//! the marker lists every path a unit claimed before writing there. A run refuses a
//! non-empty folder without the marker (and a link to one), refuses links where the
//! layout puts its files, and a unit clears an old output only when the marker or a
//! stage record names it: a recipe never deletes or overwrites what it did not write.
//!
//! Folders of recipes run before the marker existed (their `recipe.toml` starts with
//! the line rmsweb writes, and they hold `stages/`) are adopted; their stage
//! records name what may be cleared.

use super::layout::{CONFIG_FILE, Layout};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// The marker file of a recipe folder.
pub const MARKER_FILE: &str = ".rmsweb-recipe";

/// The first line of the `recipe.toml` a run writes (how folders of earlier
/// versions, without the marker, are recognized).
pub const CONFIG_HEADER: &str =
    "# The resolved configuration of the last `rmsweb recipe run` in this folder.";

/// The entries the layout puts at the top of a recipe folder: none may be a link.
const TOP: [&str; 10] = [
    MARKER_FILE,
    CONFIG_FILE,
    "stages",
    "data",
    "collect",
    "eval",
    "runs",
    "report.md",
    "report.json",
    "figures",
];

#[derive(Debug, Default, Serialize, Deserialize)]
struct Marker {
    /// Paths (relative to the folder) units claimed before writing there.
    #[serde(default)]
    written: Vec<String>,
}

fn marker_path(root: &Path) -> PathBuf {
    root.join(MARKER_FILE)
}

fn read_marker(root: &Path) -> Result<Marker> {
    let path = marker_path(root);
    let text = crate::util::fs::read_record(&path)?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a recipe marker", path.display()))
}

fn write_marker(root: &Path, m: &Marker) -> Result<()> {
    let path = marker_path(root);
    let text = serde_json::to_string_pretty(m)?;
    crate::util::fs::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `dir` holds a marker (a regular file, not a link).
fn has_marker(dir: &Path) -> bool {
    std::fs::symlink_metadata(marker_path(dir)).is_ok_and(|m| m.is_file())
}

/// Whether `dir` is a recipe folder of an earlier version (no marker).
fn is_legacy(dir: &Path) -> bool {
    let stages = dir.join("stages");
    std::fs::symlink_metadata(&stages).is_ok_and(|m| m.is_dir())
        && crate::util::fs::read_config(&dir.join(CONFIG_FILE))
            .is_ok_and(|t| t.lines().next() == Some(CONFIG_HEADER))
}

/// The folder `out` ready for a run: made (with its marker) when missing or empty,
/// taken as it is when it carries the marker, adopted when it is a recipe folder
/// of an earlier version; anything else is refused, untouched. Returns the
/// resolved folder.
pub fn prepare(out: &Path) -> Result<PathBuf> {
    let shown = out.display();
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).with_context(|| format!("creating {shown}"))?;
            let root = std::fs::canonicalize(out).with_context(|| format!("resolving {shown}"))?;
            write_marker(&root, &Marker::default())?;
            return Ok(root);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {shown}")),
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::canonicalize(out)
                .with_context(|| format!("resolving the link {shown}"))?;
            if !target.is_dir() || !has_marker(&target) {
                bail!(
                    "--out {shown} is a link to {}, which is not a recipe folder (no {MARKER_FILE}); \
                     give a new folder, or the recipe folder itself",
                    target.display()
                );
            }
            return checked(target);
        }
        Ok(m) if !m.is_dir() => bail!("--out {shown} is not a folder"),
        Ok(_) => {}
    }
    let root = std::fs::canonicalize(out).with_context(|| format!("resolving {shown}"))?;
    if has_marker(&root) {
        return checked(root);
    }
    let empty = std::fs::read_dir(&root)
        .with_context(|| format!("reading {shown}"))?
        .next()
        .is_none();
    if empty || is_legacy(&root) {
        write_marker(&root, &Marker::default())?;
        return checked(root);
    }
    bail!(
        "--out {shown} is not empty and is not a recipe folder (no {MARKER_FILE}): a recipe \
         writes only into a folder it made; give a new or empty folder"
    )
}

/// An existing recipe folder (for `recipe report`): marked, or of an earlier
/// version (then marked now); anything else is refused.
pub fn existing(out: &Path) -> Result<PathBuf> {
    let root =
        std::fs::canonicalize(out).with_context(|| format!("resolving {}", out.display()))?;
    if has_marker(&root) {
        return checked(root);
    }
    if is_legacy(&root) {
        write_marker(&root, &Marker::default())?;
        return checked(root);
    }
    bail!(
        "{} is not a recipe folder (no {MARKER_FILE})",
        out.display()
    )
}

/// Refuses a recipe folder with a link where the layout writes.
fn checked(root: PathBuf) -> Result<PathBuf> {
    for name in TOP {
        let p = root.join(name);
        if is_link(&p) {
            bail!(
                "{} is a symbolic link; a recipe folder holds no links where it writes \
                 (remove it, or give another folder)",
                p.display()
            );
        }
    }
    Ok(root)
}

/// Whether the stage records of the folder name `rel` or a path under it.
fn named_by_records(layout: &Layout, rel: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir(layout.records()) else {
        return false;
    };
    dir.flatten()
        .filter_map(|e| crate::util::fs::read_record(&e.path()).ok())
        .filter_map(|t| serde_json::from_str::<super::record::Record>(&t).ok())
        .any(|r| r.outputs.iter().any(|o| Path::new(o).starts_with(rel)))
}

/// Makes way for a unit's output at `path` (inside the recipe folder): the path is
/// claimed in the marker first, then whatever is there is removed, provided this
/// recipe wrote it (the marker or a stage record names it or a folder above it).
/// No link is followed: a link on the way is refused, a link at `path` that the
/// recipe wrote is removed itself.
pub fn clear(layout: &Layout, path: &Path) -> Result<()> {
    let rel = path.strip_prefix(&layout.root).with_context(|| {
        format!(
            "{} is outside the recipe folder {}",
            path.display(),
            layout.root.display()
        )
    })?;
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        bail!(
            "{}: not a plain path inside the recipe folder",
            path.display()
        );
    }
    let mut on_the_way = layout.root.clone();
    for c in rel.parent().into_iter().flat_map(Path::components) {
        on_the_way.push(c);
        if is_link(&on_the_way) {
            bail!(
                "{} is a symbolic link; a recipe does not write through links",
                on_the_way.display()
            );
        }
    }
    let rel_text = rel.to_string_lossy().into_owned();
    let mut marker = read_marker(&layout.root)?;
    let claimed = marker.written.iter().any(|w| rel.starts_with(Path::new(w)));
    let there = std::fs::symlink_metadata(path).ok();
    if there.is_some() && !claimed && !named_by_records(layout, rel) {
        bail!(
            "{} is where this recipe writes, but no record of this recipe names it: \
             it was not written by the recipe, and a recipe deletes only what it wrote \
             (move it away)",
            path.display()
        );
    }
    if !claimed {
        marker.written.push(rel_text);
        write_marker(&layout.root, &marker)?;
    }
    let removed = match there {
        None => Ok(()),
        Some(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Some(_) => std::fs::remove_file(path),
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_made_adopted_or_refused() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new");
        let root = prepare(&new).unwrap();
        assert!(has_marker(&root));
        // Taken again as it is.
        assert_eq!(prepare(&new).unwrap(), root);
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        prepare(&empty).unwrap();
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), "x").unwrap();
        let e = prepare(&theirs).unwrap_err().to_string();
        assert!(e.contains("not a recipe folder"), "{e}");
        assert!(!has_marker(&theirs));
        let old = d.path().join("old");
        std::fs::create_dir_all(old.join("stages")).unwrap();
        std::fs::write(
            old.join(CONFIG_FILE),
            format!("{CONFIG_HEADER}\ntasks = []\n"),
        )
        .unwrap();
        prepare(&old).unwrap();
        assert!(has_marker(&old));
    }

    #[test]
    fn a_unit_clears_only_what_the_recipe_claimed() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(prepare(&d.path().join("r")).unwrap());
        let out = layout.dataset(super::super::plan::Arm::Reflection);
        // Nothing there: claimed, then written, then cleared on the next run.
        clear(&layout, &out).unwrap();
        std::fs::create_dir_all(out.join("sft")).unwrap();
        std::fs::write(out.join("sft/samples.jsonl"), "{}").unwrap();
        clear(&layout, &out.join("sft/samples.jsonl")).unwrap();
        assert!(!out.join("sft/samples.jsonl").exists());
        clear(&layout, &out).unwrap();
        assert!(!out.exists());
        // Someone else's file in an output's place stays.
        let report = layout.collect_report("reflection");
        std::fs::create_dir_all(report.parent().unwrap()).unwrap();
        std::fs::write(&report, "mine").unwrap();
        let e = clear(&layout, &report).unwrap_err().to_string();
        assert!(e.contains("no record"), "{e}");
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "mine");
        // A link on the way is not followed.
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, layout.root.join("eval")).unwrap();
        let e = clear(&layout, &layout.eval_report("x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
