//! `rmsweb validate`: every record of a dataset checked, every problem reported with
//! file, line and field.

use super::jsonl::{JsonlFile, RecordError};
use super::model::{Task, Trajectory};
use super::store::{Dataset, resolve_inside};
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
            "incomplete last line (a write was cut off); the next append removes it".into(),
        ));
    }
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
                    let mut findings = Vec::new();
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
    for c in per_record {
        report.findings.extend(c.findings);
        report.steps += c.steps;
        report.screenshots += c.shots;
        if let Some((id, line)) = c.id {
            report.trajectories += 1;
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
    report
        .findings
        .sort_by(|a, b| (&a.file, a.line, a.severity).cmp(&(&b.file, b.line, b.severity)));
    report
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
        let mut indices = HashSet::new();
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
            if let Some(idx) = a.target_index()
                && !s.state.elements.is_empty()
                && !indices.contains(&(idx as u32))
            {
                push(
                    Severity::Warning,
                    format!("steps[{k}].output.actions[{j}].params.index"),
                    format!("index {idx} is not among the state's elements"),
                );
            }
        }
        if let Some(rel) = &s.state.screenshot {
            match resolve_inside(ds.root(), rel) {
                Err(e) => push(Severity::Error, at("state.screenshot"), e.to_string()),
                Ok(p) if !p.is_file() => push(
                    Severity::Error,
                    at("state.screenshot"),
                    format!("screenshot `{rel}` does not exist"),
                ),
                Ok(p) => {
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

fn image_dimensions(p: &Path) -> anyhow::Result<(u32, u32)> {
    Ok(image::ImageReader::open(p)?
        .with_guessed_format()?
        .into_dimensions()?)
}
