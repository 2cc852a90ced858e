//! Which histories an import reads and what applies to each: command-line options,
//! a folder's `task.json` sidecar, the task record and its id.

use super::{BrowserUseOptions, ImportError, read_input, tasks};
use crate::trajectory::Task;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A folder's `task.json`: the task its histories attempt, and per-file settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    pub task: String,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub website: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub teacher: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    /// The task's own `source` (where the task came from); default `browser-use`.
    #[serde(default)]
    pub task_source: Option<String>,
    /// Settings for single history files, keyed by file name.
    #[serde(default)]
    pub files: HashMap<String, FileSettings>,
}

/// Per-history settings in a sidecar.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub round: Option<u32>,
    #[serde(default)]
    pub reflection: Option<String>,
    #[serde(default)]
    pub teacher: Option<String>,
}

/// One history to import, with everything that applies to it.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub file: PathBuf,
    pub task: Task,
    pub success: Option<bool>,
    pub attempt: Option<u32>,
    pub round: u32,
    pub reflection: Option<String>,
    pub teacher: String,
    pub source: String,
}

/// Every history named by `inputs` (files, or folders with a `task.json`), or every
/// problem found with them.
pub(super) fn plan_units(
    inputs: &[PathBuf],
    opts: &BrowserUseOptions,
) -> Result<Vec<Unit>, Vec<ImportError>> {
    let mut units = Vec::new();
    let mut errors = Vec::new();
    for input in inputs {
        if input.is_dir() {
            match folder_units(input, opts) {
                Ok(mut u) => units.append(&mut u),
                Err(e) => errors.push(e),
            }
        } else {
            let task = match opts.task.clone() {
                Some(t) => t,
                None => match task_from_history(input, opts.max_file_bytes) {
                    Ok(Some(t)) => t,
                    Ok(None) => {
                        errors.push(ImportError::file(
                            input,
                            "no task text: give --task TEXT (no state_message of this history has a <user_request>), or import a folder with a task.json",
                        ));
                        continue;
                    }
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                },
            };
            let sidecar = Sidecar {
                task,
                ..Sidecar::default()
            };
            match make_task(&sidecar, opts, input) {
                Ok(t) => units.push(Unit {
                    file: input.clone(),
                    task: t,
                    success: opts.success,
                    attempt: opts.attempt,
                    round: opts.round.unwrap_or(1),
                    reflection: opts.reflection.clone(),
                    teacher: opts.teacher.clone().unwrap_or_default(),
                    source: opts.source.clone().unwrap_or_else(|| "browser-use".into()),
                }),
                Err(e) => errors.push(e),
            }
        }
    }
    if opts.attempt.is_some() && units.len() > 1 {
        errors.push(ImportError::file(
            &inputs[0],
            "--attempt applies to a single history; several were given",
        ));
    }
    let mut seen = HashSet::new();
    for u in &units {
        if let Ok(real) = u.file.canonicalize()
            && !seen.insert(real)
        {
            errors.push(ImportError::file(&u.file, "given twice"));
        }
    }
    if errors.is_empty() {
        Ok(units)
    } else {
        Err(errors)
    }
}

/// The histories of a folder with a `task.json`, in file-name order. The task itself
/// (text, id, website, domain, category) comes from the sidecar first; per-attempt
/// settings (success, round, reflection, teacher, source) given on the command line
/// win over the sidecar's, which win over the defaults.
fn folder_units(dir: &Path, opts: &BrowserUseOptions) -> Result<Vec<Unit>, ImportError> {
    let side_path = dir.join("task.json");
    let sidecar: Sidecar = if side_path.is_file() {
        let bytes = read_input(&side_path, opts.max_file_bytes)?;
        crate::trajectory::jsonl::parse_record(&bytes, &side_path, 1).map_err(|e| ImportError {
            file: side_path.clone(),
            location: "(sidecar)".into(),
            field: e.field,
            message: e.message,
        })?
    } else if let Some(task) = &opts.task {
        Sidecar {
            task: task.clone(),
            ..Sidecar::default()
        }
    } else {
        return Err(ImportError::file(
            dir,
            "folder has no task.json and no --task was given",
        ));
    };
    let task = make_task(&sidecar, opts, &side_path)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ImportError::file(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != "task.json")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ImportError::file(dir, "folder holds no *.json history"));
    }
    for name in sidecar.files.keys() {
        if !files.iter().any(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy() == name.as_str())
        }) {
            return Err(ImportError {
                file: side_path.clone(),
                location: "(sidecar)".into(),
                field: format!("files.{name}"),
                message: "no such history file in the folder".into(),
            });
        }
    }
    Ok(files
        .into_iter()
        .map(|file| {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fs = sidecar.files.get(&name).cloned().unwrap_or_default();
            Unit {
                task: task.clone(),
                success: opts.success.or(fs.success).or(sidecar.success),
                attempt: None,
                round: opts.round.or(fs.round).unwrap_or(1),
                reflection: opts.reflection.clone().or(fs.reflection),
                teacher: opts
                    .teacher
                    .clone()
                    .or(fs.teacher)
                    .or_else(|| sidecar.teacher.clone())
                    .unwrap_or_default(),
                source: opts
                    .source
                    .clone()
                    .or_else(|| sidecar.source.clone())
                    .unwrap_or_else(|| "browser-use".into()),
                file,
            }
        })
        .collect())
}

/// The task record: sidecar values first, then command-line ones, then derived ones.
fn make_task(side: &Sidecar, opts: &BrowserUseOptions, file: &Path) -> Result<Task, ImportError> {
    let instruction = side.task.trim().to_string();
    if instruction.is_empty() {
        return Err(ImportError::file(file, "the task text is empty"));
    }
    let website = side
        .website
        .clone()
        .or_else(|| opts.website.clone())
        .unwrap_or_default();
    let task_id = side
        .task_id
        .clone()
        .or_else(|| opts.task_id.clone())
        .unwrap_or_else(|| derived_task_id(&website, &instruction));
    if let Err(why) = check_id(&task_id) {
        return Err(ImportError {
            file: file.to_path_buf(),
            location: "(task)".into(),
            field: "task_id".into(),
            message: why,
        });
    }
    Ok(Task {
        task_id,
        domain: side
            .domain
            .clone()
            .or_else(|| opts.domain.clone())
            .unwrap_or_else(|| tasks::site_name(&website)),
        category: side
            .category
            .clone()
            .or_else(|| opts.category.clone())
            .unwrap_or_default(),
        website,
        instruction,
        source: side
            .task_source
            .clone()
            .or_else(|| opts.task_source.clone())
            .unwrap_or_else(|| "browser-use".into()),
    })
}

/// The task as Browser Use showed it to the model: the inside of the first
/// `<user_request>…</user_request>` in the history's state messages (0.8+).
/// `Ok(None)` when no state message has one; a file that is not a readable history
/// is reported here already, with the same place and field the import would name.
fn task_from_history(file: &Path, max: u64) -> Result<Option<String>, ImportError> {
    let bytes = read_input(file, max)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| ImportError {
        file: file.to_path_buf(),
        location: format!("line {} column {}", e.line(), e.column()),
        field: "(json)".into(),
        message: format!("malformed JSON: {e}"),
    })?;
    let items = value.get("history").and_then(serde_json::Value::as_array);
    Ok(items.into_iter().flatten().find_map(|item| {
        let msg = item.get("state_message")?.as_str()?;
        let start = msg.find("<user_request>")? + "<user_request>".len();
        let end = start + msg[start..].find("</user_request>")?;
        let task = msg[start..end].trim();
        (!task.is_empty()).then(|| task.to_string())
    }))
}

/// Task ids name screenshot folders, so they must be plain file names.
fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 200 {
        return Err("must be 1 to 200 characters".into());
    }
    if id.starts_with('.')
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@'))
    {
        return Err(format!(
            "`{}` may hold only letters, digits and - _ . : @ (and not start with .)",
            crate::util::sanitize::clean_line(id)
        ));
    }
    Ok(())
}

/// `<site>-<hash>` from the website and the task text (stable across runs).
pub fn derived_task_id(website: &str, instruction: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in website.bytes().chain([0]).chain(instruction.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let site = tasks::site_name(website);
    let site = if site.is_empty() {
        "task".to_string()
    } else {
        site
    };
    format!("{site}-{:08x}", h >> 32)
}
