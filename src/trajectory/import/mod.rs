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
pub mod screenshot;
pub mod tasks;

use crate::trajectory::{Dataset, Outcome, Task, Trajectory};
use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, bail};
use browser_use::{DoneInfo, ParsedHistory};
use commit::Journal;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
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

/// Reads a whole input file, refusing one over `max` bytes before reading it.
pub fn read_input(path: &Path, max: u64) -> Result<Vec<u8>, ImportError> {
    let f = std::fs::File::open(path).map_err(|e| ImportError::file(path, e.to_string()))?;
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
struct Unit {
    file: PathBuf,
    task: Task,
    success: Option<bool>,
    attempt: Option<u32>,
    round: u32,
    reflection: Option<String>,
    teacher: String,
    source: String,
}

/// Imports Browser Use histories (files, or folders with a `task.json`) into the
/// dataset at `dataset`, creating it if missing. All or nothing: on any error the
/// dataset is left as it was and the error lists every bad input.
pub fn import_browser_use(
    dataset: &Path,
    inputs: &[PathBuf],
    opts: &BrowserUseOptions,
) -> Result<ImportReport> {
    if inputs.is_empty() {
        bail!("no history files given");
    }
    let units = plan_units(inputs, opts).map_err(ImportErrors)?;
    let mut journal = Journal::default();
    let mut lock = None;
    let result = (|| {
        journal.create_dir_all(dataset)?;
        lock = Some(commit::lock_dataset(dataset)?);
        stage_and_commit(dataset, &units, opts, &mut journal)
    })();
    // The lock is held until the dataset is restored.
    let _lock = lock;
    match result {
        Ok(report) => Ok(report),
        Err(e) => {
            let problems = journal.undo();
            if problems.is_empty() {
                Err(e)
            } else {
                Err(e.context(format!(
                    "and restoring the dataset failed: {}",
                    problems.join("; ")
                )))
            }
        }
    }
}

fn plan_units(inputs: &[PathBuf], opts: &BrowserUseOptions) -> Result<Vec<Unit>, Vec<ImportError>> {
    let mut units = Vec::new();
    let mut errors = Vec::new();
    for input in inputs {
        if input.is_dir() {
            match folder_units(input, opts) {
                Ok(mut u) => units.append(&mut u),
                Err(e) => errors.push(e),
            }
        } else {
            let Some(task) = opts.task.as_deref() else {
                errors.push(ImportError::file(
                    input,
                    "no task text: give --task TEXT (or import a folder with a task.json)",
                ));
                continue;
            };
            let sidecar = Sidecar {
                task: task.to_string(),
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

/// What the dataset already holds that an import must not clash with.
struct Existing {
    tasks: HashMap<String, Task>,
    ids: HashSet<String>,
    max_attempt: HashMap<String, u32>,
}

fn existing(dataset: &Path) -> Result<Existing> {
    let mut ex = Existing {
        tasks: HashMap::new(),
        ids: HashSet::new(),
        max_attempt: HashMap::new(),
    };
    if !dataset.join("tasks.jsonl").exists() && !dataset.join("trajectories.jsonl").exists() {
        return Ok(ex);
    }
    let ds = Dataset::open(dataset)?;
    for t in ds
        .tasks()
        .context("the dataset's tasks.jsonl has a bad record; fix it before importing")?
    {
        ex.tasks.insert(t.task_id.clone(), t);
    }
    for s in ds.summaries() {
        let s = s.context(
            "the dataset's trajectories.jsonl has a bad record; fix it before importing",
        )?;
        let m = ex.max_attempt.entry(s.task_id.clone()).or_insert(0);
        *m = (*m).max(s.attempt);
        ex.ids.insert(s.id);
    }
    Ok(ex)
}

fn stage_and_commit(
    dataset: &Path,
    units: &[Unit],
    opts: &BrowserUseOptions,
    journal: &mut Journal,
) -> Result<ImportReport> {
    let mut ex = existing(dataset)?;
    let stage = tempfile::Builder::new()
        .prefix(".import-")
        .tempdir_in(dataset)
        .with_context(|| format!("staging folder in {}", dataset.display()))?;
    let mut report = ImportReport::default();
    let mut trajectories = Vec::new();
    let mut errors = Vec::new();
    for unit in units {
        if let Some(old) = ex.tasks.get(&unit.task.task_id) {
            if old.instruction != unit.task.instruction {
                errors.push(ImportError {
                    file: unit.file.clone(),
                    location: "(task)".into(),
                    field: "task_id".into(),
                    message: format!(
                        "task id `{}` already names a different task in the dataset",
                        unit.task.task_id
                    ),
                });
                continue;
            }
        } else {
            ex.tasks
                .insert(unit.task.task_id.clone(), unit.task.clone());
            report.tasks_added.push(unit.task.clone());
        }
        let next = ex.max_attempt.entry(unit.task.task_id.clone()).or_insert(0);
        let attempt = unit.attempt.unwrap_or(*next + 1);
        *next = (*next).max(attempt);
        let id = format!("{}-a{attempt}", unit.task.task_id);
        if !ex.ids.insert(id.clone()) {
            errors.push(ImportError::file(
                &unit.file,
                format!("trajectory id `{id}` is already in the dataset"),
            ));
            continue;
        }
        match stage_one(unit, &id, attempt, stage.path(), opts) {
            Ok((t, mut warnings, shots)) => {
                report.trajectories.push(ImportedTrajectory {
                    file: unit.file.clone(),
                    id: id.clone(),
                    task_id: t.task_id.clone(),
                    attempt,
                    steps: t.steps.len(),
                    screenshots: shots,
                    success: t.outcome.success,
                });
                report.warnings.append(&mut warnings);
                trajectories.push(t);
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(ImportErrors(errors).into());
    }
    let name = dataset
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "dataset".into());
    journal.will_create(&dataset.join("dataset.toml"));
    Dataset::create(dataset, &name, "created by rmsweb import")?;
    journal.append(&dataset.join("tasks.jsonl"), &report.tasks_added)?;
    let shots_dir = dataset.join("screenshots");
    journal.create_dir_all(&shots_dir)?;
    for t in &trajectories {
        let staged = stage.path().join(&t.id);
        if staged.exists() {
            journal.rename_dir(&staged, &shots_dir.join(&t.id))?;
        }
    }
    commit::sync_dir(&shots_dir);
    journal.append(&dataset.join("trajectories.jsonl"), &trajectories)?;
    Ok(report)
}

/// Reads one history, writes its screenshots to `stage/<id>/`, builds the record.
fn stage_one(
    unit: &Unit,
    id: &str,
    attempt: u32,
    stage: &Path,
    opts: &BrowserUseOptions,
) -> Result<(Trajectory, Vec<String>, usize), ImportError> {
    let bytes = read_input(&unit.file, opts.max_file_bytes)?;
    let parsed: ParsedHistory = browser_use::parse_history_bytes(&bytes, &unit.file)?;
    drop(bytes);
    let ParsedHistory {
        mut steps,
        shots,
        done,
        judgement,
        mut warnings,
    } = parsed;
    let base_dir = unit
        .file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let policy = screenshot::ShotPolicy {
        base_dir,
        root: opts.screenshot_root.as_deref(),
        max_bytes: opts.max_file_bytes,
    };
    // Screenshots are checked (decoded) in parallel, a bounded batch at a time, and
    // written in step order; the first bad one (in step order) is reported.
    use rayon::prelude::*;
    let jobs: Vec<(usize, browser_use::ShotSource)> = shots
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| (i, s)))
        .collect();
    let dir = stage.join(id);
    let mut written = 0;
    for batch in jobs.chunks(32) {
        let pngs: Vec<Result<Vec<u8>, String>> = batch
            .par_iter()
            .map(|(_, src)| screenshot::load_png(src, &policy))
            .collect();
        for ((i, src), png) in batch.iter().zip(pngs) {
            let step = &mut steps[*i];
            let png = png.map_err(|message| ImportError {
                file: unit.file.clone(),
                location: format!("history[{}]", step.index),
                field: match src {
                    browser_use::ShotSource::Inline(_) => "state.screenshot",
                    browser_use::ShotSource::Path(_) => "state.screenshot_path",
                }
                .into(),
                message,
            })?;
            let out = dir.join(format!("{}.png", step.index));
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&out, &png))
                .map_err(|e| {
                    ImportError::file(
                        &unit.file,
                        format!("staging screenshot {}: {e}", out.display()),
                    )
                })?;
            step.state.screenshot = Some(format!("screenshots/{id}/{}.png", step.index));
            written += 1;
        }
    }
    let outcome = outcome(unit, done.as_ref(), judgement.as_ref(), &mut warnings);
    let mut t = Trajectory {
        id: id.to_string(),
        task_id: unit.task.task_id.clone(),
        attempt,
        round: unit.round,
        reflection: unit.reflection.clone(),
        source: unit.source.clone(),
        teacher: unit.teacher.clone(),
        outcome,
        steps,
    };
    t.fill_progress();
    Ok((t, warnings, written))
}

/// The outcome: the command line or sidecar first, then the judge's verdict stored
/// in the history, then the final `done` (no `done` at all is a failure).
fn outcome(
    unit: &Unit,
    done: Option<&DoneInfo>,
    judgement: Option<&browser_use::Judgement>,
    warnings: &mut Vec<String>,
) -> Outcome {
    let final_answer = done.and_then(|d| d.text.clone());
    if let Some(success) = unit.success {
        return Outcome {
            success,
            judge: Some("import".into()),
            reason: Some(format!(
                "marked {} at import",
                if success { "successful" } else { "failed" }
            )),
            final_answer,
            score: None,
        };
    }
    if let Some(j) = judgement {
        return Outcome {
            success: j.verdict,
            judge: Some("browser-use:judge".into()),
            reason: j.reason.clone(),
            final_answer,
            score: None,
        };
    }
    match done {
        Some(d) => {
            let success = d.success.unwrap_or_else(|| {
                warnings.push(format!(
                    "{}: the final done action does not say whether it succeeded; counted as a success (use --failure to say otherwise)",
                    unit.file.display()
                ));
                true
            });
            Outcome {
                success,
                judge: Some("browser-use:done".into()),
                reason: Some(format!("the final done action reported success={success}")),
                final_answer,
                score: None,
            }
        }
        None => Outcome {
            success: false,
            judge: Some("browser-use:done".into()),
            reason: Some("the history ends without a done action".into()),
            final_answer: None,
            score: None,
        },
    }
}
