//! `report.json`, the stable shape scripts read (issue #15):
//!
//! ```text
//! {"tasks": [...], "eval_seeds": [first, count],
//!  "base": {"pass1": x, "episodes": n, "checkpoint": "path"},
//!  "sft": {"pass1": x, "episodes": n, "checkpoint": "path"},
//!  "rl": {"<variant>": {"pass1": x, "episodes": n, "checkpoint": "path"}},
//!  "reflection": {"with": {"pass1": x, "steps_solved": s}, "without": {...}},
//!  "per_task": {"<task>": {"base": x, "sft": x, "<variant>": x}}}
//! ```
//!
//! `eval_seeds` count is episodes per task type; an RL variant pools the episodes of
//! its seeds and names the first seed's checkpoint; checkpoints are relative to the
//! recipe folder; `reflection` compares the SFT policies trained on the collections
//! with and without reflection (held-out pass@1, mean steps on solved episodes).
//! A figure not measured yet is `null`; `base` (the pretrained base model
//! zero-shot) is there only with `[model]`.

use super::summary::{Analysis, PolicyResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// pass@1 of one policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyJson {
    pub pass1: Option<f64>,
    pub episodes: usize,
    pub checkpoint: Option<String>,
}

/// One side of the reflection comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmJson {
    pub pass1: Option<f64>,
    pub steps_solved: Option<f64>,
}

/// With vs without reflection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReflectionJson {
    pub with: ArmJson,
    pub without: ArmJson,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportJson {
    pub tasks: Vec<String>,
    pub eval_seeds: [u64; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<PolicyJson>,
    pub sft: PolicyJson,
    pub rl: BTreeMap<String, PolicyJson>,
    pub reflection: ReflectionJson,
    pub per_task: BTreeMap<String, BTreeMap<String, Option<f64>>>,
}

fn policy(p: &PolicyResult) -> PolicyJson {
    PolicyJson {
        pass1: p.pass1,
        episodes: p.episodes,
        checkpoint: p.checkpoint.clone(),
    }
}

fn arm(p: &PolicyResult) -> ArmJson {
    ArmJson {
        pass1: p.pass1,
        steps_solved: p.steps_solved,
    }
}

/// Builds the file's content.
pub fn build(a: &Analysis) -> ReportJson {
    let per_task = a
        .tasks
        .iter()
        .map(|t| {
            let mut m = BTreeMap::new();
            if let Some(b) = &a.base {
                m.insert("base".to_string(), b.task_pass1(t));
            }
            m.insert("sft".to_string(), a.sft.task_pass1(t));
            for r in &a.rl {
                m.insert(r.name.clone(), r.task_pass1(t));
            }
            (t.clone(), m)
        })
        .collect();
    ReportJson {
        tasks: a.tasks.clone(),
        eval_seeds: [a.eval_seeds.0, a.eval_seeds.1 as u64],
        base: a.base.as_ref().map(policy),
        sft: policy(&a.sft),
        rl: a.rl.iter().map(|r| (r.name.clone(), policy(r))).collect(),
        reflection: ReflectionJson {
            with: arm(&a.sft),
            without: arm(&a.sft_baseline),
        },
        per_task,
    }
}

/// Reads a `report.json`; the error names the file.
pub fn read(path: &std::path::Path) -> anyhow::Result<ReportJson> {
    let text = crate::util::fs::read_record(path)?;
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
