//! Importers: Browser Use agent histories ([`import_browser_use`]) and public task
//! lists ([`tasks::import_tasks`]) into a dataset folder.
//!
//! An import is all or nothing: every input is read, checked and staged first (records
//! in memory, screenshots in a temporary folder inside the dataset); only when all of
//! them are good are the screenshots renamed into place and the records appended.
//! Any error on the way undoes what was written, so the dataset is left byte for
//! byte as it was (a folder the import created is removed again).

pub mod browser_use;
mod commit;
pub mod dom_text;
mod plan;
pub mod screenshot;
mod stage;
pub mod tasks;
mod text_limit;

pub use commit::staging_folders;
pub use plan::{FileSettings, Sidecar, derived_task_id};
pub use stage::import_browser_use;

use crate::trajectory::Task;
use crate::util::sanitize::clean_line;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Input files larger than this are refused before they are read.
pub const MAX_FILE_BYTES: u64 = 512 << 20;

/// A problem with one input, naming the file, the place in it (`history[3]`,
/// `line 7`) and the field. Its text is safe for a terminal: parts that come from
/// the input (field names, values quoted in messages) are cleaned of control
/// characters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {}: {}: {}", clean_line(&file.display().to_string()), clean_line(location), clean_line(field), clean_line(message))]
pub struct ImportError {
    pub file: PathBuf,
    /// `history[3]` (0-based item), `line 7`, `(top level)`, `(file)`, ...
    pub location: String,
    /// Dotted path of the field (`state.screenshot`), or `(json)` / `(file)`.
    pub field: String,
    pub message: String,
}

impl ImportError {
    /// An error about a file as a whole.
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        ImportError {
            file: file.to_path_buf(),
            location: "(file)".into(),
            field: "(file)".into(),
            message: message.into(),
        }
    }
}

/// Every input problem found by one import (nothing was written).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} input problem(s), nothing imported:\n{}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ImportErrors(pub Vec<ImportError>);

/// Every problem found in an input file a command reads before it does anything
/// (a benchmark list, a query file, a labels file): nothing was sent or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} input problem(s), nothing done:\n{}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct InputErrors(pub Vec<ImportError>);

/// Reads a whole input file, refusing one over `max` bytes before reading it.
pub fn read_input(path: &Path, max: u64) -> Result<Vec<u8>, ImportError> {
    let f =
        crate::util::fs::open_regular(path).map_err(|e| ImportError::file(path, e.to_string()))?;
    let len = f
        .metadata()
        .map_err(|e| ImportError::file(path, e.to_string()))?
        .len();
    if len > max {
        return Err(ImportError::file(
            path,
            format!("file is {len} bytes, over the {max}-byte import limit"),
        ));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ImportError::file(path, e.to_string()))?;
    if buf.len() as u64 > max {
        return Err(ImportError::file(
            path,
            format!("file grew past the {max}-byte import limit while read"),
        ));
    }
    Ok(buf)
}

/// Options of `rmsweb import browser-use`.
#[derive(Debug, Clone)]
pub struct BrowserUseOptions {
    /// The task text (required unless a folder's `task.json` gives it).
    pub task: Option<String>,
    pub task_id: Option<String>,
    pub website: Option<String>,
    pub domain: Option<String>,
    pub category: Option<String>,
    /// Overrides the outcome taken from the final `done`.
    pub success: Option<bool>,
    pub teacher: Option<String>,
    /// `browser-use@0.8.1`, ...
    pub source: Option<String>,
    /// The task record's `source` (where the task came from); default `browser-use`.
    pub task_source: Option<String>,
    /// Attempt number of a single imported file (default: next free one).
    pub attempt: Option<u32>,
    pub round: Option<u32>,
    /// Reflection text the attempt was given.
    pub reflection: Option<String>,
    /// Absolute `screenshot_path`s are accepted only inside this folder.
    pub screenshot_root: Option<PathBuf>,
    /// Inputs (histories, sidecars, screenshots) over this size are refused.
    pub max_file_bytes: u64,
    /// A `screenshot_path` that is allowed but not there (its folder was cleaned
    /// up) leaves the step without a screenshot, with a warning, instead of
    /// refusing the history.
    pub allow_missing_screenshots: bool,
}

impl Default for BrowserUseOptions {
    fn default() -> Self {
        BrowserUseOptions {
            task: None,
            task_id: None,
            website: None,
            domain: None,
            category: None,
            success: None,
            teacher: None,
            source: None,
            task_source: None,
            attempt: None,
            round: None,
            reflection: None,
            screenshot_root: None,
            max_file_bytes: MAX_FILE_BYTES,
            allow_missing_screenshots: false,
        }
    }
}

/// What an import added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportReport {
    /// Tasks appended to `tasks.jsonl` (tasks already present are not repeated).
    pub tasks_added: Vec<Task>,
    pub trajectories: Vec<ImportedTrajectory>,
    /// Non-fatal findings, each naming its file and place.
    pub warnings: Vec<String>,
}

/// One imported history.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedTrajectory {
    pub file: PathBuf,
    pub id: String,
    pub task_id: String,
    pub attempt: u32,
    pub steps: usize,
    pub screenshots: usize,
    pub success: bool,
}
