//! `rmsweb validate`: every file of a dataset checked (`dataset.toml` when it is
//! opened; `tasks.jsonl`, `trajectories.jsonl` and the screenshots they name,
//! `mined/pairs.jsonl`, `mined/pairs.corrected.jsonl`, `mined/report.json`,
//! `annotations.jsonl`, the JSON files of `sft/`, leftover staging folders), every
//! problem reported with file, line and field. What an import would refuse is an
//! error here too. The files of later stages are checked by their own modules
//! ([`StageCheck`]s the caller registers: `mine::validate`, `annotate::validate`).

use super::jsonl::{JsonlFile, RecordError};
use super::model::{Step, Task, Trajectory};
use super::store::Dataset;
use crate::action::check::{check_params, index_value};
use crate::util::fs::resolve_inside;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// How serious a finding is: errors make the dataset unusable by later stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{sev}: {}:{}: {}: {}",
            self.file, self.line, self.field, self.message
        )
    }
}

/// What `validate` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ValidationReport {
    pub tasks: usize,
    pub trajectories: usize,
    pub steps: usize,
    pub screenshots: usize,
    /// Records of `mined/pairs.jsonl`.
    pub pairs: usize,
    /// Events of `annotations.jsonl`.
    pub annotations: usize,
    pub findings: Vec<Finding>,
}

impl ValidationReport {
    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }

    /// Number of warnings.
    pub fn warnings(&self) -> usize {
        self.findings.len() - self.errors()
    }
}

/// Options of a validation run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidateOptions {
    /// Decode the header of every screenshot (slower; checks they are real images).
    pub decode_images: bool,
}

/// A finding about `file`'s `line` and `field`.
pub fn finding(sev: Severity, file: &Path, line: usize, field: &str, msg: String) -> Finding {
    Finding {
        severity: sev,
        file: file.display().to_string(),
        line,
        field: field.to_string(),
        message: msg,
    }
}

/// A record that does not parse, as an error naming its file, line and field.
pub fn from_record_error(e: RecordError) -> Finding {
    Finding {
        severity: Severity::Error,
        file: e.file.display().to_string(),
        line: e.line,
        field: e.field,
        message: e.message,
    }
}

/// A torn last line (an error) or an unterminated last record (a warning).
pub fn torn(file: &JsonlFile, out: &mut Vec<Finding>) {
    if let Some(line) = file.torn_tail() {
        out.push(finding(
            Severity::Error,
            file.path(),
            line as usize,
            "(record)",
            "incomplete last line: it does not parse (a write was cut off); the next append removes it"
                .into(),
        ));
    }
    if file.last_record_unterminated() {
        out.push(finding(
            Severity::Warning,
            file.path(),
            file.span(file.len() - 1).map_or(0, |s| s.line as usize),
            "(record)",
            "the last record has no newline after it; it is read, and the next append adds the newline"
                .into(),
        ));
    }
}

/// The line of record `i`.
pub fn line_of(file: &JsonlFile, i: usize) -> usize {
    file.span(i).map_or(0, |s| s.line as usize)
}

/// A duplicate key in record `i`, as an error (JSON keeps only the last value).
pub fn duplicate_keys(file: &JsonlFile, i: usize) -> Option<Finding> {
    let raw = file.raw(i)?;
    let dup = crate::util::json::first_duplicate_key(&raw).ok()??;
    let field = if dup.path.is_empty() {
        "(record)".to_string()
    } else {
        dup.path.clone()
    };
    Some(finding(
        Severity::Error,
        file.path(),
        line_of(file, i),
        &field,
        dup.to_string(),
    ))
}

/// What checking one trajectory record found.
struct Checked {
    /// Its id and line, when it parsed.
    id: Option<(String, usize)>,
    steps: usize,
    shots: usize,
    findings: Vec<Finding>,
}

/// What the core checks learned, for the checks registered after them.
#[derive(Debug, Default)]
pub struct Known {
    /// Steps of every trajectory, by id.
    pub steps_of: HashMap<String, usize>,
    /// Ids of the mined pairs (filled by the pairs check).
    pub pair_ids: HashSet<String>,
}

/// A check of the files a later stage owns (mined pairs, annotations), registered
/// with [`validate`] by its caller so this module need not know those stages.
pub trait StageCheck {
    /// Checks the stage's files under `root`, adding findings and counts to `report`.
    fn check(&self, root: &Path, known: &mut Known, report: &mut ValidationReport);
}

/// Checks each task record (its JSON, its duplicate keys, a `task_id` seen before),
/// counting them into `report`; returns each task id's line.
fn check_tasks(tasks_file: &JsonlFile, report: &mut ValidationReport) -> HashMap<String, usize> {
    let mut task_lines: HashMap<String, usize> = HashMap::new();
    for i in 0..tasks_file.len() {
        report.findings.extend(duplicate_keys(tasks_file, i));
        match tasks_file.get::<Task>(i) {
            Ok(t) => {
                let line = tasks_file.span(i).map_or(0, |s| s.line as usize);
                if let Some(first) = task_lines.insert(t.task_id.clone(), line) {
                    report.findings.push(finding(
                        Severity::Error,
                        tasks_file.path(),
                        line,
                        "task_id",
                        format!("duplicate task_id `{}` (first on line {first})", t.task_id),
                    ));
                }
                report.tasks += 1;
            }
            Err(e) => report.findings.push(from_record_error(e)),
        }
    }
    task_lines
}

/// Checks each trajectory record, in parallel (its JSON, duplicate keys, task, steps
/// and screenshots).
fn check_records(ds: &Dataset, opts: ValidateOptions, task_ids: &HashSet<&str>) -> Vec<Checked> {
    let traj_file = ds.trajectories_file();
    (0..traj_file.len())
        .into_par_iter()
        .map(|i| {
            let line = traj_file.span(i).map_or(0, |s| s.line as usize);
            match traj_file.get::<Trajectory>(i) {
                Ok(t) => {
                    let mut findings: Vec<Finding> =
                        duplicate_keys(traj_file, i).into_iter().collect();
                    let shots = check_trajectory(ds, &t, line, task_ids, opts, &mut findings);
                    Checked {
                        id: Some((t.id, line)),
                        steps: t.steps.len(),
                        shots,
                        findings,
                    }
                }
                Err(e) => Checked {
                    id: None,
                    steps: 0,
                    shots: 0,
                    findings: vec![from_record_error(e)],
                },
            }
        })
        .collect()
}

/// Checks every task and trajectory of the dataset, then runs `stages` in order.
pub fn validate(
    ds: &Dataset,
    opts: ValidateOptions,
    stages: &[&dyn StageCheck],
) -> ValidationReport {
    let mut report = ValidationReport::default();
    let tasks_file = ds.tasks_file();
    let traj_file = ds.trajectories_file();
    torn(tasks_file, &mut report.findings);
    torn(traj_file, &mut report.findings);

    let task_lines = check_tasks(tasks_file, &mut report);
    let task_ids: HashSet<&str> = task_lines.keys().map(String::as_str).collect();

    let per_record = check_records(ds, opts, &task_ids);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut steps_of: HashMap<String, usize> = HashMap::new();
    for c in per_record {
        report.findings.extend(c.findings);
        report.steps += c.steps;
        report.screenshots += c.shots;
        if let Some((id, line)) = c.id {
            report.trajectories += 1;
            steps_of.insert(id.clone(), c.steps);
            if let Some(first) = seen.insert(id.clone(), line) {
                report.findings.push(finding(
                    Severity::Error,
                    traj_file.path(),
                    line,
                    "id",
                    format!("duplicate trajectory id `{id}` (first on line {first})"),
                ));
            }
        }
    }
    let mut known = Known {
        steps_of,
        ..Default::default()
    };
    for stage in stages {
        stage.check(ds.root(), &mut known, &mut report);
    }
    check_other_files(ds.root(), &mut report.findings);
    report
        .findings
        .sort_by(|a, b| (&a.file, a.line, a.severity).cmp(&(&b.file, b.line, b.severity)));
    report
}

/// The other files a dataset may hold: `mined/report.json` and the JSON and JSON
/// Lines files of `sft/` must parse; staging folders of an interrupted import are
/// reported (the next import removes them).
fn check_other_files(root: &Path, out: &mut Vec<Finding>) {
    const MAX_JSON_BYTES: u64 = 64 << 20;
    let mut json_files = vec![root.join("mined").join("report.json")];
    let mut jsonl_files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("sft")) {
        let mut paths: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            match p.extension().and_then(|e| e.to_str()) {
                Some("json") => json_files.push(p),
                Some("jsonl") => jsonl_files.push(p),
                _ => {}
            }
        }
    }
    for p in json_files.into_iter().filter(|p| p.exists()) {
        let problem = match crate::util::fs::read_limited(&p, MAX_JSON_BYTES) {
            Err(e) => Some(e.to_string()),
            Ok(bytes) => match crate::util::json::first_duplicate_key(&bytes) {
                Err(e) => Some(format!("not JSON: {e}")),
                Ok(Some(d)) => Some(d.to_string()),
                Ok(None) => None,
            },
        };
        if let Some(message) = problem {
            out.push(finding(Severity::Error, &p, 0, "(file)", message));
        }
    }
    for p in jsonl_files {
        let file = match JsonlFile::open(&p) {
            Ok(f) => f,
            Err(e) => {
                out.push(finding(Severity::Error, &p, 0, "(file)", format!("{e:#}")));
                continue;
            }
        };
        torn(&file, out);
        for i in 0..file.len() {
            if let Err(e) = file.get::<serde::de::IgnoredAny>(i) {
                out.push(from_record_error(e));
            } else {
                out.extend(duplicate_keys(&file, i));
            }
        }
    }
    for dir in crate::trajectory::import::staging_folders(root) {
        out.push(finding(
            Severity::Warning,
            &dir,
            0,
            "(folder)",
            "staging folder of an interrupted import; the next import into this dataset removes it"
                .into(),
        ));
    }
}

fn check_trajectory(
    ds: &Dataset,
    t: &Trajectory,
    line: usize,
    task_ids: &HashSet<&str>,
    opts: ValidateOptions,
    out: &mut Vec<Finding>,
) -> usize {
    let file = ds.trajectories_file().path();
    let mut push = |sev, field: String, msg: String| {
        out.push(finding(sev, file, line, &field, msg));
    };
    if !task_ids.contains(t.task_id.as_str()) {
        push(
            Severity::Error,
            "task_id".into(),
            format!("task `{}` is not in tasks.jsonl", t.task_id),
        );
    }
    if t.steps.is_empty() {
        push(
            Severity::Warning,
            "steps".into(),
            "trajectory has no steps".into(),
        );
    }
    let mut shots = 0;
    for (k, s) in t.steps.iter().enumerate() {
        shots += check_step(ds, s, k, opts, &mut push);
    }
    shots
}

/// What a finding is reported through: severity, field, message.
type Push<'a> = dyn FnMut(Severity, String, String) + 'a;

/// Checks step `k`: its index and progress, its elements' indices, its actions, and
/// its screenshot. Returns 1 when the step has a readable screenshot.
fn check_step(ds: &Dataset, s: &Step, k: usize, opts: ValidateOptions, push: &mut Push) -> usize {
    let at = |f: &str| format!("steps[{k}].{f}");
    if s.index as usize != k {
        push(
            Severity::Warning,
            at("index"),
            format!("step index {} at position {k}", s.index),
        );
    }
    if !(0.0..=1.0).contains(&s.state.progress) {
        push(
            Severity::Error,
            at("state.progress"),
            format!("progress {} is outside 0..1", s.state.progress),
        );
    }
    let mut indices: HashSet<u32> = HashSet::new();
    for (j, e) in s.state.elements.iter().enumerate() {
        if !indices.insert(e.index) {
            push(
                Severity::Error,
                format!("steps[{k}].state.elements[{j}].index"),
                format!("element index {} appears twice", e.index),
            );
        }
    }
    if s.output.actions.is_empty() {
        push(
            Severity::Warning,
            at("output.actions"),
            "step has no action".into(),
        );
    }
    for (j, a) in s.output.actions.iter().enumerate() {
        if !a.is_known() {
            push(
                Severity::Warning,
                format!("steps[{k}].output.actions[{j}].name"),
                format!("unknown action `{}`", a.name),
            );
        }
        if let Err(e) = check_params(a) {
            push(
                Severity::Error,
                format!("steps[{k}].output.actions[{j}].params.{}", e.key),
                e.message,
            );
        } else if let Some(v) = a.params.get("index").filter(|v| !v.is_null())
            && a.target_index().is_some()
            && !s.state.elements.is_empty()
            && !index_value(v).is_some_and(|i| indices.contains(&i))
        {
            push(
                Severity::Warning,
                format!("steps[{k}].output.actions[{j}].params.index"),
                format!("index {v} is not among the state's elements"),
            );
        }
    }
    match &s.state.screenshot {
        Some(rel) => check_screenshot(ds, rel, &at("state.screenshot"), opts, push),
        None => 0,
    }
}

/// Checks a step's screenshot: inside the dataset, present, a regular file within the
/// size limit, and (with `decode_images`) decodable. Returns 1 when it is readable.
fn check_screenshot(
    ds: &Dataset,
    rel: &str,
    field: &str,
    opts: ValidateOptions,
    push: &mut Push,
) -> usize {
    let p = match resolve_inside(ds.root(), rel) {
        Err(e) => {
            push(Severity::Error, field.into(), e.to_string());
            return 0;
        }
        Ok(p) if !p.exists() => {
            push(
                Severity::Error,
                field.into(),
                format!("screenshot `{rel}` does not exist"),
            );
            return 0;
        }
        Ok(p) => p,
    };
    // What every reader of screenshots refuses: not a regular file, or over the size
    // limit.
    if let Err(e) = crate::util::image::check_file(&p) {
        let why = e.to_string();
        let why = why
            .strip_prefix(&format!("{}: ", p.display()))
            .unwrap_or(&why);
        push(
            Severity::Error,
            field.into(),
            format!("screenshot `{rel}`: {why}"),
        );
        return 0;
    }
    if opts.decode_images
        && let Err(e) = image_dimensions(&p)
    {
        push(
            Severity::Error,
            field.into(),
            format!("screenshot `{rel}` does not decode: {e}"),
        );
    }
    1
}

fn image_dimensions(p: &Path) -> Result<(u32, u32), String> {
    crate::util::image::file_dimensions(p)
}
