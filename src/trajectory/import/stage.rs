//! Running an import: reading and checking every history, staging screenshots
//! inside the dataset, then committing everything at once (or undoing it all).

use super::browser_use::{self, DoneInfo, ParsedHistory};
use super::commit::{self, Journal};
use super::plan::{Unit, plan_units};
use super::{
    BrowserUseOptions, ImportError, ImportErrors, ImportReport, ImportedTrajectory, read_input,
    screenshot,
};
use crate::trajectory::jsonl::{MAX_RECORD_BYTES, serialized_len};
use crate::trajectory::{Dataset, Outcome, Task, Trajectory};
use crate::util::human_bytes;
use anyhow::{Context, Result, bail};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

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
        // Holding the lock, no other import runs: staging folders left here were
        // left by one that died (kill -9, power loss).
        let cleaned = commit::remove_stale_staging(dataset);
        let mut report = stage_and_commit(dataset, &units, opts, &mut journal)?;
        report.warnings.splice(0..0, cleaned);
        Ok(report)
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
        .prefix(commit::STAGING_PREFIX)
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
    commit_staged(
        dataset,
        stage.path(),
        &report.tasks_added,
        &trajectories,
        journal,
    )?;
    Ok(report)
}

/// Writes what was staged into the dataset through the journal: the dataset's file
/// (when new), the new tasks, each trajectory's screenshots moved into place, then the
/// trajectories.
fn commit_staged(
    dataset: &Path,
    stage: &Path,
    tasks_added: &[Task],
    trajectories: &[Trajectory],
    journal: &mut Journal,
) -> Result<()> {
    let name = dataset
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "dataset".into());
    journal.will_create(&dataset.join("dataset.toml"));
    Dataset::create(dataset, &name, "created by rmsweb import")?;
    journal.append(&dataset.join("tasks.jsonl"), tasks_added)?;
    let shots_dir = dataset.join("screenshots");
    journal.create_dir_all(&shots_dir)?;
    for t in trajectories {
        let staged = stage.join(&t.id);
        if staged.exists() {
            journal.rename_dir(&staged, &shots_dir.join(&t.id))?;
        }
    }
    commit::sync_dir(&shots_dir);
    journal.append(&dataset.join("trajectories.jsonl"), trajectories)?;
    Ok(())
}

/// Reads and parses one history file; a JSON key given twice is refused (JSON keeps
/// the last, so a value would be lost silently).
fn read_history(unit: &Unit, opts: &BrowserUseOptions) -> Result<ParsedHistory, ImportError> {
    let bytes = read_input(&unit.file, opts.max_file_bytes)?;
    let parsed: ParsedHistory = browser_use::parse_history_bytes(&bytes, &unit.file)?;
    if let Ok(Some(dup)) = crate::util::json::first_duplicate_key(&bytes) {
        return Err(ImportError {
            file: unit.file.clone(),
            location: "(json)".into(),
            field: if dup.path.is_empty() {
                "(top level)".into()
            } else {
                dup.path.clone()
            },
            message: dup.to_string(),
        });
    }
    Ok(parsed)
}

/// Reads one history, writes its screenshots to `stage/<id>/`, builds the record.
fn stage_one(
    unit: &Unit,
    id: &str,
    attempt: u32,
    stage: &Path,
    opts: &BrowserUseOptions,
) -> Result<(Trajectory, Vec<String>, usize), ImportError> {
    let parsed = read_history(unit, opts)?;
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
    // Screenshots are checked and written once the record is known (`write_shots`).
    let mut jobs: Vec<(usize, browser_use::ShotSource)> = Vec::new();
    for (i, shot) in shots.into_iter().enumerate() {
        let shot = shot.map(|s| relocated(s, base_dir, &unit.file, i, &mut warnings));
        match shot {
            Some(browser_use::ShotSource::Path(p))
                if opts.allow_missing_screenshots && screenshot::is_missing(&p, &policy) =>
            {
                warnings.push(format!(
                    "{}: history[{i}]: state.screenshot_path: `{p}` not found; the step is imported without a screenshot",
                    unit.file.display()
                ));
            }
            Some(s) => jobs.push((i, s)),
            None => {}
        }
    }
    // The record is built (screenshot paths included) and its size checked before
    // anything is written, so the import never stores a record the reader refuses.
    for (i, _) in &jobs {
        let step = &mut steps[*i];
        step.state.screenshot = Some(format!("screenshots/{id}/{}.png", step.index));
    }
    let mut outcome = outcome(unit, done.as_ref(), judgement.as_ref(), &mut warnings);
    if let Some(j) = &judgement {
        outcome
            .extra
            .insert("judgement".into(), serde_json::Value::Object(j.raw.clone()));
    }
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
    check_record_size(&t, &unit.task, &unit.file)?;
    let written = write_shots(&t, &jobs, &policy, &stage.join(id), unit)?;
    Ok((t, warnings, written))
}

/// Checks (decodes) the screenshots `jobs` in parallel, a bounded batch at a time,
/// and writes them into `dir` in step order; the first bad one (in step order) is
/// reported. Returns how many were written.
fn write_shots(
    t: &Trajectory,
    jobs: &[(usize, browser_use::ShotSource)],
    policy: &screenshot::ShotPolicy,
    dir: &Path,
    unit: &Unit,
) -> Result<usize, ImportError> {
    use rayon::prelude::*;
    let mut written = 0;
    for batch in jobs.chunks(32) {
        let pngs: Vec<Result<Vec<u8>, String>> = batch
            .par_iter()
            .map(|(_, src)| screenshot::load_png(src, policy))
            .collect();
        for ((i, src), png) in batch.iter().zip(pngs) {
            let step = &t.steps[*i];
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
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&out, &png))
                .map_err(|e| {
                    ImportError::file(
                        &unit.file,
                        format!("staging screenshot {}: {e}", out.display()),
                    )
                })?;
            written += 1;
        }
    }
    Ok(written)
}

/// Browser Use writes absolute screenshot paths into its agent's temporary folder
/// (`/tmp/browser_use_agent_…/screenshots/step_3.png`), which is gone once the run
/// is over or the history is copied elsewhere. When such a path does not exist and
/// the history's own folder has `screenshots/<that file name>` (the agent folder's
/// layout, copied along with the history), that file is used instead, with a
/// warning naming both.
fn relocated(
    shot: browser_use::ShotSource,
    base_dir: &Path,
    file: &Path,
    i: usize,
    warnings: &mut Vec<String>,
) -> browser_use::ShotSource {
    let browser_use::ShotSource::Path(p) = &shot else {
        return shot;
    };
    let path = Path::new(p);
    if !path.is_absolute() || path.exists() {
        return shot;
    }
    let Some(name) = path.file_name() else {
        return shot;
    };
    let beside = Path::new("screenshots").join(name);
    if !base_dir.join(&beside).is_file() {
        return shot;
    }
    warnings.push(format!(
        "{}: history[{i}]: state.screenshot_path: `{p}` is gone; using {} beside the history",
        file.display(),
        beside.display()
    ));
    browser_use::ShotSource::Path(beside.to_string_lossy().into_owned())
}

/// Refuses a trajectory or task whose JSON line would be over the record limit (the
/// reader would refuse it, and every later import would refuse the dataset),
/// naming the biggest step.
fn check_record_size(t: &Trajectory, task: &Task, file: &Path) -> Result<(), ImportError> {
    let size = |r: Result<usize>| r.map_err(|e| ImportError::file(file, e.to_string()));
    let task_len = size(serialized_len(task))?;
    if task_len > MAX_RECORD_BYTES {
        return Err(ImportError {
            file: file.to_path_buf(),
            location: "(task)".into(),
            field: "instruction".into(),
            message: format!(
                "the task record would be {}, over the {} record limit",
                human_bytes(task_len as u64),
                human_bytes(MAX_RECORD_BYTES as u64)
            ),
        });
    }
    let len = size(serialized_len(t))?;
    if len <= MAX_RECORD_BYTES {
        return Ok(());
    }
    let mut biggest = (0, 0);
    for s in &t.steps {
        let n = size(serialized_len(s))?;
        if n > biggest.1 {
            biggest = (s.index, n);
        }
    }
    Err(ImportError {
        file: file.to_path_buf(),
        location: format!("history[{}]", biggest.0),
        field: "(record)".into(),
        message: format!(
            "the trajectory record would be {}, over the {} record limit the reader \
             accepts (this item alone is {}); nothing was imported",
            human_bytes(len as u64),
            human_bytes(MAX_RECORD_BYTES as u64),
            human_bytes(biggest.1 as u64)
        ),
    })
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
            ..Outcome::default()
        };
    }
    if let Some(j) = judgement {
        return Outcome {
            success: j.verdict,
            judge: Some("browser-use:judge".into()),
            reason: j.reason.clone(),
            final_answer,
            ..Outcome::default()
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
                ..Outcome::default()
            }
        }
        None => Outcome {
            success: false,
            judge: Some("browser-use:done".into()),
            reason: Some("the history ends without a done action".into()),
            final_answer: None,
            ..Outcome::default()
        },
    }
}
