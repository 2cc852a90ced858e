//! Verdicts beside the trajectories: `<dataset>/judge/verdicts.jsonl`, appended;
//! the last verdict of a trajectory (by a model) is the standing one.

use crate::trajectory::jsonl::{self, JsonlFile};
use crate::trajectory::{Task, Trajectory};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One step's evidence as the judge scored it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub step: u32,
    /// 1 (nothing relevant) to 5.
    pub score: u8,
    pub reason: String,
    /// Whether it went into the verdict's key states.
    pub selected: bool,
    /// The screenshot the judge saw with it (dataset-relative), if images were sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
}

/// The judge's decision on one trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub trajectory_id: String,
    pub task_id: String,
    pub success: bool,
    /// The verdict answer's reasoning, as written.
    pub reasoning: String,
    pub key_points: String,
    pub evidence: Vec<Evidence>,
    pub judge_model: String,
    pub prompt_version: String,
    /// SHA-256 of the task and trajectory judged: a changed one is judged again.
    pub content_hash: String,
    pub created_at: String,
}

impl Verdict {
    /// The verdict's reasoning in one line: a JSON answer's `thoughts`, else the
    /// last line before `Status:` without its `Thoughts:` label.
    pub fn summary(&self) -> String {
        if let Ok(serde_json::Value::Object(m)) =
            serde_json::from_str::<serde_json::Value>(self.reasoning.trim())
            && let Some(t) = m.get("thoughts").and_then(serde_json::Value::as_str)
        {
            return t.split_whitespace().collect::<Vec<_>>().join(" ");
        }
        self.reasoning
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("status:"))
            .map(|l| l.strip_prefix("Thoughts:").unwrap_or(l).trim())
            .next_back()
            .unwrap_or_default()
            .to_string()
    }
}

/// Where a dataset's verdicts are.
pub fn path(dataset: &Path) -> PathBuf {
    dataset.join("judge").join("verdicts.jsonl")
}

/// Every verdict of the dataset, oldest first (none when the file is missing).
pub fn read(dataset: &Path) -> Result<Vec<Verdict>> {
    let p = path(dataset);
    if !p.exists() {
        return Ok(Vec::new());
    }
    Ok(JsonlFile::open(&p)?.all()?)
}

/// Appends verdicts in one write.
pub fn append(dataset: &Path, verdicts: &[Verdict]) -> Result<()> {
    if verdicts.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dataset.join("judge"))?;
    jsonl::append(&path(dataset), verdicts)?;
    Ok(())
}

/// The standing verdict per trajectory (by `model` when given): the last one.
pub fn standing<'a>(all: &'a [Verdict], model: Option<&str>) -> HashMap<&'a str, &'a Verdict> {
    let mut out = HashMap::new();
    for v in all {
        if model.is_none_or(|m| m == v.judge_model) {
            out.insert(v.trajectory_id.as_str(), v);
        }
    }
    out
}

/// The content hash of a task and a trajectory.
pub fn content_hash(task: &Task, t: &Trajectory) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(task).unwrap_or_default());
    h.update([0]);
    h.update(serde_json::to_vec(t).unwrap_or_default());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A verdict for tests: judge `m`, prompt `v`, reasoning `r`, no evidence.
#[cfg(test)]
pub(crate) fn test_verdict(id: &str, success: bool) -> Verdict {
    Verdict {
        trajectory_id: id.into(),
        task_id: "t".into(),
        success,
        reasoning: "r".into(),
        key_points: String::new(),
        evidence: Vec::new(),
        judge_model: "m".into(),
        prompt_version: "v".into(),
        content_hash: String::new(),
        created_at: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_json_and_plain_verdicts() {
        let mut v = test_verdict("t", true);
        v.reasoning =
            "{\n \"thoughts\": \"size 10.5,\\n in the cart\",\n\"status\": \"success\"}".into();
        assert_eq!(v.summary(), "size 10.5, in the cart");
        v.reasoning = "Thoughts: first.\nThoughts: the cart holds 10.5.\nStatus: failure".into();
        assert_eq!(v.summary(), "the cart holds 10.5.");
    }
}
