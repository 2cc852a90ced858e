//! `rmsweb validate`: every file of a dataset checked (`dataset.toml` when it is
//! opened; `tasks.jsonl`, `trajectories.jsonl` and the screenshots they name,
//! `mined/pairs.jsonl`, `mined/pairs.corrected.jsonl`, `mined/report.json`,
//! `annotations.jsonl`, the JSON files of `sft/`, leftover staging folders), every
//! problem reported with file, line and field. What an import would refuse is an
//! error here too.

use super::jsonl::{JsonlFile, RecordError};
use super::model::{Task, Trajectory};
use super::store::Dataset;
use crate::action::check::{check_params, index_value};
use crate::annotate::{AnnotationEvent, Folded};
use crate::mine::pair::MinedPair;
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

fn finding(sev: Severity, file: &Path, line: usize, field: &str, msg: String) -> Finding {
    Finding {
        severity: sev,
        file: file.display().to_string(),
        line,
        field: field.to_string(),
        message: msg,
    }
}

fn from_record_error(e: RecordError) -> Finding {
    Finding {
        severity: Severity::Error,
        file: e.file.display().to_string(),
        line: e.line,
        field: e.field,
        message: e.message,
    }
}

fn torn(file: &JsonlFile, out: &mut Vec<Finding>) {
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
fn line_of(file: &JsonlFile, i: usize) -> usize {
    file.span(i).map_or(0, |s| s.line as usize)
}

/// A duplicate key in record `i`, as an error (JSON keeps only the last value).
fn duplicate_keys(file: &JsonlFile, i: usize) -> Option<Finding> {
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

/// Checks every task and trajectory of the dataset.
pub fn validate(ds: &Dataset, opts: ValidateOptions) -> ValidationReport {
    let mut report = ValidationReport::default();
    let tasks_file = ds.tasks_file();
    let traj_file = ds.trajectories_file();
    torn(tasks_file, &mut report.findings);
    torn(traj_file, &mut report.findings);

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
    let task_ids: HashSet<&str> = task_lines.keys().map(String::as_str).collect();

    let per_record: Vec<Checked> = (0..traj_file.len())
        .into_par_iter()
        .map(|i| {
            let line = traj_file.span(i).map_or(0, |s| s.line as usize);
            match traj_file.get::<Trajectory>(i) {
                Ok(t) => {
                    let mut findings: Vec<Finding> =
                        duplicate_keys(traj_file, i).into_iter().collect();
                    let shots = check_trajectory(ds, &t, line, &task_ids, opts, &mut findings);
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
        .collect();

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
    let pairs = ds.root().join("mined").join("pairs.jsonl");
    let pair_ids = check_pairs(&pairs, &steps_of, &mut report.findings);
    report.pairs = pair_ids.len();
    let corrected = ds.root().join("mined").join("pairs.corrected.jsonl");
    if corrected.exists() {
        check_pairs(&corrected, &steps_of, &mut report.findings);
    }
    report.annotations = check_annotations(ds.root(), &pair_ids, &mut report.findings);
    check_other_files(ds.root(), &mut report.findings);
    report
        .findings
        .sort_by(|a, b| (&a.file, a.line, a.severity).cmp(&(&b.file, b.line, b.severity)));
    report
}

/// Checks a file of mined pairs: each record parses, ids are unique, and both sides
/// name a step that exists. Returns the pair ids read (empty if there is no file).
fn check_pairs(
    path: &Path,
    steps_of: &HashMap<String, usize>,
    out: &mut Vec<Finding>,
) -> HashSet<String> {
    let mut ids = HashSet::new();
    let file = match JsonlFile::open(path) {
        Ok(f) => f,
        Err(e) => {
            out.push(finding(
                Severity::Error,
                path,
                0,
                "(file)",
                format!("{e:#}"),
            ));
            return ids;
        }
    };
    torn(&file, out);
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for i in 0..file.len() {
        out.extend(duplicate_keys(&file, i));
        let line = line_of(&file, i);
        let p: MinedPair = match file.get(i) {
            Ok(p) => p,
            Err(e) => {
                out.push(from_record_error(e));
                continue;
            }
        };
        if let Some(first) = first_line.insert(p.id.clone(), line) {
            out.push(finding(
                Severity::Error,
                path,
                line,
                "id",
                format!("duplicate pair id `{}` (first on line {first})", p.id),
            ));
        }
        for (side, r) in [("success", &p.success), ("loc", &p.loc)] {
            match steps_of.get(&r.trajectory) {
                None => out.push(finding(
                    Severity::Error,
                    path,
                    line,
                    &format!("{side}.trajectory"),
                    format!("trajectory `{}` is not in trajectories.jsonl", r.trajectory),
                )),
                Some(&n) if r.step as usize >= n => out.push(finding(
                    Severity::Error,
                    path,
                    line,
                    &format!("{side}.step"),
                    format!(
                        "step {} is past the end of trajectory `{}` ({n} steps)",
                        r.step, r.trajectory
                    ),
                )),
                Some(_) => {}
            }
        }
        for (field, a) in [
            ("target_action", &p.target_action),
            ("loc_action", &p.loc_action),
        ] {
            if let Err(e) = check_params(a) {
                out.push(finding(
                    Severity::Error,
                    path,
                    line,
                    &format!("{field}.params.{}", e.key),
                    e.message,
                ));
            }
        }
        ids.insert(p.id);
    }
    ids
}

/// Checks `annotations.jsonl`: each event parses, its value can be applied (what
/// `annotate export` needs), and it names a mined pair. Returns the number of events.
fn check_annotations(root: &Path, pair_ids: &HashSet<String>, out: &mut Vec<Finding>) -> usize {
    let path = root.join("annotations.jsonl");
    let file = match JsonlFile::open(&path) {
        Ok(f) => f,
        Err(e) => {
            out.push(finding(
                Severity::Error,
                &path,
                0,
                "(file)",
                format!("{e:#}"),
            ));
            return 0;
        }
    };
    torn(&file, out);
    let mut events = Vec::new();
    let mut lines = Vec::new();
    for i in 0..file.len() {
        out.extend(duplicate_keys(&file, i));
        let line = line_of(&file, i);
        match file.get::<AnnotationEvent>(i) {
            Ok(e) => {
                if !pair_ids.contains(&e.pair_id) {
                    out.push(finding(
                        Severity::Warning,
                        &path,
                        line,
                        "pair_id",
                        format!("pair `{}` is not in mined/pairs.jsonl", e.pair_id),
                    ));
                }
                if chrono::DateTime::parse_from_rfc3339(&e.ts).is_err() {
                    out.push(finding(
                        Severity::Warning,
                        &path,
                        line,
                        "ts",
                        format!("`{}` is not an RFC 3339 time", e.ts),
                    ));
                }
                events.push(e);
                lines.push(line);
            }
            Err(e) => out.push(from_record_error(e)),
        }
    }
    let n = events.len();
    for (k, message) in Folded::new(events).problem_events() {
        out.push(finding(
            Severity::Error,
            &path,
            lines.get(k).copied().unwrap_or(0),
            "value",
            message,
        ));
    }
    n
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
        if let Some(rel) = &s.state.screenshot {
            match resolve_inside(ds.root(), rel) {
                Err(e) => push(Severity::Error, at("state.screenshot"), e.to_string()),
                Ok(p) if !p.exists() => push(
                    Severity::Error,
                    at("state.screenshot"),
                    format!("screenshot `{rel}` does not exist"),
                ),
                Ok(p) => {
                    // What every reader of screenshots refuses: not a regular file, or
                    // over the size limit.
                    if let Err(e) = crate::util::image::check_file(&p) {
                        let why = e.to_string();
                        let why = why
                            .strip_prefix(&format!("{}: ", p.display()))
                            .unwrap_or(&why);
                        push(
                            Severity::Error,
                            at("state.screenshot"),
                            format!("screenshot `{rel}`: {why}"),
                        );
                        continue;
                    }
                    shots += 1;
                    if opts.decode_images
                        && let Err(e) = image_dimensions(&p)
                    {
                        push(
                            Severity::Error,
                            at("state.screenshot"),
                            format!("screenshot `{rel}` does not decode: {e}"),
                        );
                    }
                }
            }
        }
    }
    shots
}

fn image_dimensions(p: &Path) -> Result<(u32, u32), String> {
    crate::util::image::file_dimensions(p)
}
