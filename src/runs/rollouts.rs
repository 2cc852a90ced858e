//! Reading an RL run's `rollouts.jsonl` (FORMATS.md: per group `{step, prompt_id,
//! samples: [{text, action, reward, rule}], gate}`, plus rmsweb's `routed`, `mean`,
//! `std`, `gen_batch`) for the Reward tab's rollout browser. The file is indexed by
//! line and groups are parsed on demand, so a long run's file costs 16 bytes a group;
//! a bad line is an error naming the file, line and field, shown in place of that
//! group, and the others stay readable. Fields other than `samples` are optional, so
//! files from other trainers with the FORMATS.md core fields read too.

use crate::trajectory::jsonl::JsonlFile;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One sampled response of a group.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RolloutSample {
    #[serde(default)]
    pub text: String,
    /// The parsed action (null when the response did not parse).
    #[serde(default)]
    pub action: Option<serde_json::Value>,
    pub reward: f64,
    #[serde(default)]
    pub rule: String,
}

/// One prompt's group of rollouts at a step.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RolloutGroup {
    #[serde(default)]
    pub step: u64,
    #[serde(default)]
    pub prompt_id: String,
    #[serde(default)]
    pub gate: String,
    /// `rl`, `salvage` or `discarded` (rmsweb's trainer).
    #[serde(default)]
    pub routed: Option<String>,
    #[serde(default)]
    pub gen_batch: Option<u64>,
    pub samples: Vec<RolloutSample>,
}

impl RolloutGroup {
    /// Mean and population std of the rewards.
    pub fn reward_stats(&self) -> (f64, f64) {
        let n = self.samples.len().max(1) as f64;
        let mean = self.samples.iter().map(|s| s.reward).sum::<f64>() / n;
        let var = self
            .samples
            .iter()
            .map(|s| (s.reward - mean).powi(2))
            .sum::<f64>()
            / n;
        (mean, var.sqrt())
    }
}

/// A run's rollouts file, indexed.
pub struct Rollouts {
    file: JsonlFile,
    run: PathBuf,
}

impl Rollouts {
    /// Indexes `RUN/rollouts.jsonl`; a run without one is an error saying so.
    pub fn open(run_dir: &Path) -> anyhow::Result<Rollouts> {
        let path = run_dir.join("rollouts.jsonl");
        anyhow::ensure!(
            path.is_file(),
            "{}: no rollouts (only RL runs write rollouts.jsonl)",
            path.display()
        );
        Ok(Rollouts {
            file: JsonlFile::open(&path)?,
            run: run_dir.to_path_buf(),
        })
    }

    /// The run folder.
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.file.len()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Group `i`, or the error naming file, line and field.
    pub fn group(&self, i: usize) -> Result<RolloutGroup, String> {
        self.file.get(i).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_read_lazily_and_a_bad_line_names_file_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("rollouts.jsonl"),
            concat!(
                r#"{"step":1,"prompt_id":"p1","gate":"accepted","routed":"rl","samples":[{"text":"click(2)","action":{"name":"click","params":{"index":2}},"reward":1.0,"rule":"click.same_index"},{"text":"x","action":null,"reward":0.0,"rule":"parse.error"}]}"#,
                "\n",
                r#"{"step":1,"prompt_id":"p2","gate":"std_gate","samples":[{"text":"a","reward":"high"}]}"#,
                "\n",
                r#"{"step":2,"prompt_id":"p3","gate":"competence_gate","samples":[]}"#,
                "\n"
            ),
        )
        .unwrap();
        let r = Rollouts::open(d.path()).unwrap();
        assert_eq!(r.len(), 3);
        let g = r.group(0).unwrap();
        assert_eq!(g.samples.len(), 2);
        assert_eq!(g.routed.as_deref(), Some("rl"));
        assert_eq!(g.reward_stats(), (0.5, 0.5));
        let e = r.group(1).unwrap_err();
        assert!(
            e.contains("rollouts.jsonl") && e.contains(":2") && e.contains("reward"),
            "{e}"
        );
        assert_eq!(r.group(2).unwrap().step, 2);
        let none = tempfile::tempdir().unwrap();
        let e = Rollouts::open(none.path()).err().unwrap().to_string();
        assert!(e.contains("only RL runs"), "{e}");
    }
}
