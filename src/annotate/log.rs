//! Reading and appending `annotations.jsonl`.

use super::event::AnnotationEvent;
use crate::trajectory::jsonl::{self, JsonlFile, RecordError};
use std::path::{Path, PathBuf};

/// The annotation log of one dataset.
#[derive(Debug, Clone)]
pub struct AnnotationLog {
    path: PathBuf,
}

impl AnnotationLog {
    /// The log of the dataset at `root` (`root/annotations.jsonl`).
    pub fn for_dataset(root: &Path) -> Self {
        Self::at(root.join("annotations.jsonl"))
    }

    /// A log at an explicit path.
    pub fn at(path: PathBuf) -> Self {
        AnnotationLog { path }
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads every event in file order. A missing file is an empty log; a torn last
    /// line (a crash mid-append) is not an event and is skipped; any other bad line
    /// is an error naming file, line and field.
    pub fn read(&self) -> anyhow::Result<Vec<AnnotationEvent>> {
        let file = JsonlFile::open(&self.path)?;
        let events: Result<Vec<AnnotationEvent>, RecordError> = file.all();
        Ok(events?)
    }

    /// Appends one event: a single locked write followed by fsync. When this returns
    /// `Ok`, the event is on disk.
    pub fn append(&self, event: &AnnotationEvent) -> anyhow::Result<()> {
        jsonl::append(&self.path, std::slice::from_ref(event))?;
        Ok(())
    }
}
