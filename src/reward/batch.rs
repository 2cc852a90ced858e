//! Scoring cases in bulk (`rmsweb reward batch`) and finding a step's target and
//! elements (`rmsweb reward score --state D:TRAJ:STEP`).
//!
//! Batch input line (FORMATS.md): `{"target": Action, "candidate": "text",
//! "elements": [Element]?}`; `target` may also be a list of actions (a multi-action
//! step, scored with [`score_against`]). Output, one line per non-blank input line,
//! in order: `{"line": N, "score", "level", "rule", "reason"}` or
//! `{"line": N, "error": "..."}`. Blank lines are skipped, as JSON Lines allows.

use super::{Decision, RewardConfig, score_against};
use crate::action::Action;
use crate::trajectory::{Dataset, Element, Step};
use anyhow::{Context, bail};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// One batch case.
/// Extra fields (an id, notes) are allowed and ignored, as everywhere in FORMATS.md.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct RawCase {
    target: Value,
    candidate: String,
    #[serde(default)]
    elements: Option<Vec<Element>>,
}

/// A parsed batch case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub targets: Vec<Action>,
    pub candidate: String,
    pub elements: Vec<Element>,
}

/// Reads a target given as one action or a list of actions; errors name the field
/// path (`target[1].params`).
pub fn parse_targets(v: Value, field: &str) -> Result<Vec<Action>, String> {
    let at = |e: serde_path_to_error::Error<serde_json::Error>| {
        let p = e.path().to_string();
        let p = if p == "." { String::new() } else { p };
        let sep = if p.starts_with('[') || p.is_empty() {
            ""
        } else {
            "."
        };
        format!("{field}{sep}{p}: {}", e.into_inner())
    };
    let targets: Vec<Action> = match v {
        Value::Array(_) => serde_path_to_error::deserialize(v).map_err(at)?,
        Value::Object(_) => vec![serde_path_to_error::deserialize(v).map_err(at)?],
        other => {
            return Err(format!(
                "{field}: expected an action object {{\"name\": .., \"params\": ..}} or a list of them, found {other}"
            ));
        }
    };
    if targets.is_empty() {
        return Err(format!("{field}: the list of target actions is empty"));
    }
    Ok(targets)
}

/// Parses one batch line; the error names the field (`elements[2].index: ...`).
pub fn parse_case(line: &str) -> Result<Case, String> {
    let de = &mut serde_json::Deserializer::from_str(line);
    let raw: RawCase = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let p = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            format!("invalid JSON: {inner}")
        } else if p == "." || p.is_empty() {
            inner.to_string()
        } else {
            format!("{p}: {inner}")
        }
    })?;
    // One case per line: a second value after the first is an error, not dropped.
    de.end()
        .map_err(|e| format!("text after the case's JSON object (one case per line): {e}"))?;
    if let Ok(Some(dup)) = crate::util::json::first_duplicate_key(line.as_bytes()) {
        return Err(dup.to_string());
    }
    Ok(Case {
        targets: parse_targets(raw.target, "target")?,
        candidate: raw.candidate,
        elements: raw.elements.unwrap_or_default(),
    })
}

/// One output line of `reward batch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchLine {
    Scored {
        line: usize,
        #[serde(flatten)]
        decision: Decision,
    },
    Failed {
        line: usize,
        error: String,
    },
}

/// Scores one input line (1-based `line`).
pub fn score_line(line: usize, text: &str, cfg: &RewardConfig) -> BatchLine {
    match parse_case(text) {
        Ok(c) => BatchLine::Scored {
            line,
            decision: score_against(&c.candidate, &c.targets, &c.elements, cfg),
        },
        Err(error) => BatchLine::Failed { line, error },
    }
}

/// Counts of a batch run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchSummary {
    pub scored: usize,
    /// Line numbers that failed.
    pub failed: Vec<usize>,
}

/// Lines scored in parallel per chunk; output order is input order.
const CHUNK: usize = 8192;

/// Longest case line read; a longer one is reported (and skipped) without being held.
pub const MAX_LINE_BYTES: usize = crate::trajectory::jsonl::MAX_RECORD_BYTES;

/// Scores every line of `input`, writing one JSON line per non-blank input line to
/// `out`. Malformed lines are reported in place and do not stop the run.
pub fn run_batch(
    input: impl BufRead,
    mut out: impl Write,
    cfg: &RewardConfig,
) -> anyhow::Result<BatchSummary> {
    let mut summary = BatchSummary::default();
    // (line number, the line or why it cannot be read)
    let mut chunk: Vec<(usize, Result<String, String>)> = Vec::with_capacity(CHUNK);
    let mut flush = |chunk: &mut Vec<(usize, Result<String, String>)>,
                     summary: &mut BatchSummary| {
        let results: Vec<BatchLine> = chunk
            .par_iter()
            .map(|(n, l)| match l {
                Ok(text) => score_line(*n, text, cfg),
                Err(error) => BatchLine::Failed {
                    line: *n,
                    error: error.clone(),
                },
            })
            .collect();
        chunk.clear();
        for r in results {
            match &r {
                BatchLine::Scored { .. } => summary.scored += 1,
                BatchLine::Failed { line, .. } => summary.failed.push(*line),
            }
            serde_json::to_writer(&mut out, &r)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        anyhow::Ok(())
    };
    let mut lines = crate::util::lines::BoundedLines::new(input, MAX_LINE_BYTES);
    let mut i = 0;
    while let Some(line) = lines.next_line().context("reading the cases")? {
        i += 1;
        let text = match line {
            crate::util::lines::Line::Text(t) => Ok(t),
            crate::util::lines::Line::NotUtf8(at) => Err(format!("not UTF-8 (byte {at})")),
            crate::util::lines::Line::TooLong(n) => Err(format!(
                "the line is {}, over the {} limit of a case",
                crate::util::human_bytes(n),
                crate::util::human_bytes(MAX_LINE_BYTES as u64)
            )),
        };
        if text.as_ref().is_ok_and(|t| t.trim().is_empty()) {
            continue;
        }
        chunk.push((i, text));
        if chunk.len() == CHUNK {
            flush(&mut chunk, &mut summary)?;
        }
    }
    flush(&mut chunk, &mut summary)?;
    Ok(summary)
}

/// A step named as `DATASET:TRAJECTORY_ID:STEP` (split at the last two colons, so
/// the dataset path may hold colons).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRef {
    pub dataset: PathBuf,
    pub trajectory: String,
    pub step: u32,
}

impl std::str::FromStr for StepRef {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let mut it = s.rsplitn(3, ':');
        let (Some(step), Some(trajectory), Some(dataset)) = (it.next(), it.next(), it.next())
        else {
            bail!("--state {s:?}: expected DATASET:TRAJECTORY:STEP");
        };
        let step = step
            .parse()
            .with_context(|| format!("--state {s:?}: step {step:?} is not a step number"))?;
        if dataset.is_empty() || trajectory.is_empty() {
            bail!("--state {s:?}: expected DATASET:TRAJECTORY:STEP");
        }
        Ok(StepRef {
            dataset: dataset.into(),
            trajectory: trajectory.into(),
            step,
        })
    }
}

impl StepRef {
    /// Loads the step (matched by its `index`).
    pub fn load(&self) -> anyhow::Result<Step> {
        let ds = Dataset::open(&self.dataset)?;
        let t = ds.trajectory_by_id(&self.trajectory)?.with_context(|| {
            format!(
                "{}: no trajectory with id {:?}",
                self.dataset.display(),
                self.trajectory
            )
        })?;
        let n = t.steps.len();
        t.steps
            .into_iter()
            .find(|s| s.index == self.step)
            .with_context(|| {
                format!(
                    "{}: trajectory {:?} has {n} steps; none has index {}",
                    self.dataset.display(),
                    self.trajectory,
                    self.step
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_scored_in_order_and_errors_name_line_and_field() {
        let input = concat!(
            r#"{"target": {"name": "click", "params": {"index": 1}}, "candidate": "click(1)"}"#,
            "\n\n",
            r#"{"target": {"name": "click", "params": {"index": 1}}, "candidate": "click(2)", "elements": [{"index": "x"}]}"#,
            "\n",
            "not json\n",
            r#"{"target": [{"name": "input", "params": {"index": 1, "text": "a"}}, {"name": "click", "params": {"index": 2}}], "candidate": "input(1, \"a\")"}"#,
            "\n",
            r#"{"target": 3, "candidate": "x"}"#,
            "\n",
        );
        let mut out = Vec::new();
        let s = run_batch(input.as_bytes(), &mut out, &RewardConfig::default()).unwrap();
        assert_eq!(s.scored, 2);
        assert_eq!(s.failed, [3, 4, 6]);
        let lines: Vec<BatchLine> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        let BatchLine::Scored { line: 1, decision } = &lines[0] else {
            panic!("{:?}", lines[0])
        };
        assert_eq!(decision.score, 1.0);
        let BatchLine::Failed { line: 3, error } = &lines[1] else {
            panic!("{:?}", lines[1])
        };
        assert!(error.starts_with("elements[0].index:"), "{error}");
        assert!(matches!(&lines[2], BatchLine::Failed { line: 4, .. }));
        let BatchLine::Scored { line: 5, decision } = &lines[3] else {
            panic!("{:?}", lines[3])
        };
        assert_eq!(decision.rule, "multi.rest_differs");
        let BatchLine::Failed { line: 6, error } = &lines[4] else {
            panic!("{:?}", lines[4])
        };
        assert!(error.starts_with("target: expected an action"), "{error}");
    }

    #[test]
    fn target_errors_name_their_path() {
        let e = parse_targets(
            serde_json::json!([{"name": "click"}, {"params": {}}]),
            "target",
        )
        .unwrap_err();
        assert!(e.starts_with("target[1]"), "{e}");
        let e = parse_case(r#"{"target": {"name": "click"}, "candidate": 3}"#).unwrap_err();
        assert!(e.starts_with("candidate:"), "{e}");
        let e = parse_case(r#"{"target": {"name": "click"}, "candidat": "x"}"#).unwrap_err();
        assert!(e.contains("missing field `candidate`"), "{e}");
        assert!(
            parse_case(r#"{"id": 7, "target": {"name": "go_back"}, "candidate": "x"}"#).is_ok()
        );
    }

    #[test]
    fn a_second_case_on_one_line_is_an_error_not_dropped() {
        let one = r#"{"target": {"name": "go_back"}, "candidate": "go_back()"}"#;
        assert!(parse_case(&format!("{one}  ")).is_ok());
        let e = parse_case(&format!("{one} {one}")).unwrap_err();
        assert!(e.contains("text after the case"), "{e}");
        let e =
            parse_case(r#"{"target": {"name": "go_back"}, "candidate": "a", "candidate": "b"}"#)
                .unwrap_err();
        // serde names a repeated field of the case itself; nested ones are found too.
        assert!(e.contains("duplicate field `candidate`"), "{e}");
        let e = parse_case(
            r#"{"target": {"name": "go_back", "name": "back"}, "candidate": "go_back()"}"#,
        )
        .unwrap_err();
        assert!(e.contains("duplicate"), "{e}");
        let mut out = Vec::new();
        let input = [
            format!("{one} {one}\n").as_bytes(),
            b"\xff\n",
            one.as_bytes(),
        ]
        .concat();
        let s = run_batch(&input[..], &mut out, &RewardConfig::default()).unwrap();
        assert_eq!((s.scored, s.failed), (1, vec![1, 2]));
    }

    #[test]
    fn step_refs_split_at_the_last_colons() {
        let r: StepRef = "C:/data/set:traj-1:4".parse().unwrap();
        assert_eq!(r.dataset, PathBuf::from("C:/data/set"));
        assert_eq!(r.trajectory, "traj-1");
        assert_eq!(r.step, 4);
        assert!("set:traj".parse::<StepRef>().is_err());
        assert!("set:traj:x".parse::<StepRef>().is_err());
    }
}
