//! The dataset folder (FORMATS.md): `dataset.toml`, `tasks.jsonl`,
//! `trajectories.jsonl`, screenshots. Opening indexes line offsets only; records are
//! parsed when asked for, so a dataset of 150k steps opens at once.

use super::jsonl::{self, JsonlFile, RecordError};
use super::model::{SCHEMA_VERSION, Task, Trajectory};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `dataset.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetMeta {
    pub name: String,
    pub schema: u32,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub notes: String,
}

/// What the trajectory list needs, read without keeping the steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajectorySummary {
    /// Position in `trajectories.jsonl` (record number, 0-based).
    #[serde(skip)]
    pub record: usize,
    pub id: String,
    pub task_id: String,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub round: u32,
    #[serde(default)]
    pub teacher: String,
    #[serde(default)]
    pub source: String,
    pub outcome: SummaryOutcome,
    #[serde(default)]
    pub reflection: Option<String>,
    #[serde(rename = "steps", deserialize_with = "count_seq")]
    pub step_count: usize,
}

/// The outcome fields a summary keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryOutcome {
    pub success: bool,
}

fn count_seq<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of steps")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
            let mut n = 0;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                n += 1;
            }
            Ok(n)
        }
    }
    d.deserialize_seq(V)
}

/// An open dataset folder.
#[derive(Debug)]
pub struct Dataset {
    root: PathBuf,
    meta: DatasetMeta,
    tasks: JsonlFile,
    trajectories: JsonlFile,
    ids: OnceLock<HashMap<String, usize>>,
}

impl Dataset {
    /// Opens a dataset folder. `dataset.toml` is optional (schema 1 is assumed);
    /// one that names another major schema version is refused.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !root.is_dir() {
            bail!(
                "{}: not a dataset folder (no such directory)",
                root.display()
            );
        }
        let meta = read_meta(&root)?;
        let tasks = JsonlFile::open(&root.join("tasks.jsonl"))?;
        let trajectories = JsonlFile::open(&root.join("trajectories.jsonl"))?;
        Ok(Dataset {
            root,
            meta,
            tasks,
            trajectories,
            ids: OnceLock::new(),
        })
    }

    /// Creates the folder and its `dataset.toml` if missing, then opens it.
    pub fn create(root: impl AsRef<Path>, name: &str, notes: &str) -> Result<Self> {
        let root = root.as_ref();
        std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        let meta_path = root.join("dataset.toml");
        if !meta_path.exists() {
            let meta = DatasetMeta {
                name: name.to_string(),
                schema: SCHEMA_VERSION,
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                notes: notes.to_string(),
            };
            crate::util::fs::write_atomic(&meta_path, toml::to_string(&meta)?.as_bytes())?;
        }
        Self::open(root)
    }

    /// Reopens the files (after an append by this or another process).
    pub fn reload(&mut self) -> Result<()> {
        *self = Self::open(&self.root)?;
        Ok(())
    }

    /// The dataset folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `dataset.toml`'s contents.
    pub fn meta(&self) -> &DatasetMeta {
        &self.meta
    }

    /// The task file's index.
    pub fn tasks_file(&self) -> &JsonlFile {
        &self.tasks
    }

    /// The trajectory file's index.
    pub fn trajectories_file(&self) -> &JsonlFile {
        &self.trajectories
    }

    /// Number of trajectories (records), known without parsing them.
    pub fn trajectory_count(&self) -> usize {
        self.trajectories.len()
    }

    /// Number of tasks.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Parses every task.
    pub fn tasks(&self) -> Result<Vec<Task>, RecordError> {
        self.tasks.all()
    }

    /// Parses trajectory record `i`.
    pub fn trajectory(&self, i: usize) -> Result<Trajectory, RecordError> {
        self.trajectories.get(i)
    }

    /// The record number of the trajectory with this id (the index of ids is built
    /// on first use, in parallel).
    pub fn position_of(&self, id: &str) -> Option<usize> {
        self.ids
            .get_or_init(|| {
                use rayon::prelude::*;
                (0..self.trajectories.len())
                    .into_par_iter()
                    .filter_map(|i| {
                        let head = self.trajectories.head(i, 512)?;
                        let id = match leading_id(&head) {
                            Some(id) => id,
                            None => id_of(&self.trajectories.raw(i)?)?,
                        };
                        Some((id, i))
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect()
            })
            .get(id)
            .copied()
    }

    /// Parses the trajectory with this id, if there is one.
    pub fn trajectory_by_id(&self, id: &str) -> Result<Option<Trajectory>, RecordError> {
        self.position_of(id).map(|i| self.trajectory(i)).transpose()
    }

    /// Summaries of every trajectory, in file order, parsed in parallel without
    /// keeping steps. Unreadable records are returned as errors in place.
    pub fn summaries(&self) -> Vec<Result<TrajectorySummary, RecordError>> {
        use rayon::prelude::*;
        (0..self.trajectories.len())
            .into_par_iter()
            .map(|i| {
                let mut s: TrajectorySummary = self.trajectories.get(i)?;
                s.record = i;
                Ok(s)
            })
            .collect()
    }

    /// Appends tasks (one locked, fsynced write).
    pub fn append_tasks(&mut self, tasks: &[Task]) -> Result<()> {
        jsonl::append(&self.root.join("tasks.jsonl"), tasks)?;
        self.reload()
    }

    /// Appends trajectories (one locked, fsynced write).
    pub fn append_trajectories(&mut self, trajectories: &[Trajectory]) -> Result<()> {
        jsonl::append(&self.root.join("trajectories.jsonl"), trajectories)?;
        self.reload()
    }

    /// Resolves a path stored in the dataset (e.g. a screenshot) inside the root.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf> {
        crate::util::fs::resolve_inside(&self.root, rel)
    }
}

/// Longest `dataset.toml` read (it holds a name, a version and notes).
const MAX_META_BYTES: u64 = 1 << 20;

/// Reads and checks `root/dataset.toml`: optional (schema 1 is assumed, the name is
/// the folder's), a regular file of at most 1 MiB, and one that names another major
/// schema version is refused. Commands that read only part of a dataset (`annotate`)
/// check it too.
pub fn read_meta(root: &Path) -> Result<DatasetMeta> {
    let meta_path = root.join("dataset.toml");
    if !meta_path.exists() {
        return Ok(DatasetMeta {
            name: root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            schema: SCHEMA_VERSION,
            created_at: String::new(),
            notes: String::new(),
        });
    }
    let text = crate::util::fs::read_text_limited(&meta_path, MAX_META_BYTES)?;
    let meta: DatasetMeta =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", meta_path.display()))?;
    if meta.schema != SCHEMA_VERSION {
        bail!(
            "{}: schema = {} is not supported by this rmsweb (it reads schema {SCHEMA_VERSION})",
            meta_path.display(),
            meta.schema
        );
    }
    Ok(meta)
}

/// The `id` of a record that starts with it (`{"id": "…"` with any whitespace, no
/// escapes): what rmsweb and most writers produce, read from the first bytes only.
fn leading_id(head: &[u8]) -> Option<String> {
    let skip_ws = |b: &[u8]| -> usize { b.iter().take_while(|c| c.is_ascii_whitespace()).count() };
    let mut rest = head.strip_prefix(b"{")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b"\"id\"")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b":")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (rest[end] == b'"')
        .then(|| std::str::from_utf8(&rest[..end]).ok().map(str::to_owned))
        .flatten()
}

/// The `id` of a trajectory record by a parse that skips everything else.
fn id_of(raw: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Probe {
        id: String,
    }
    serde_json::from_slice::<Probe>(raw).ok().map(|p| p.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::fs::resolve_inside;

    #[test]
    fn resolve_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        assert!(resolve_inside(dir.path(), "/etc/passwd").is_err());
        assert!(resolve_inside(dir.path(), "../x.png").is_err());
        assert!(resolve_inside(dir.path(), "a/../../x.png").is_err());
        assert!(resolve_inside(dir.path(), "screenshots/a/1.png").is_ok());
    }

    #[test]
    fn id_fast_path_and_fallback_agree() {
        assert_eq!(
            id_of(br#"{"id":"t1-a0","task_id":"t1"}"#).as_deref(),
            Some("t1-a0")
        );
        assert_eq!(
            id_of(br#"{"task_id":"t1","id":"x\"y"}"#).as_deref(),
            Some("x\"y")
        );
    }
}
