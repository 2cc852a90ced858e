//! The sections of `recipe.toml` one stage each reads, with their defaults.

use super::variant::DEFAULT_VARIANTS;
use crate::policy::scripted::TeacherThinking;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the browser and the pages are. Not part of any stage's hash: moving
/// Chromium does not make results stale.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSection {
    /// Chromium executable (default `/usr/bin/chromium`).
    pub chromium: Option<PathBuf>,
    /// MiniWoB++ html folder (default `$RMSWEB_MINIWOB_DIR` or `~/.cache/rmsweb/miniwob`).
    pub miniwob_dir: Option<PathBuf>,
}

/// Teacher collection, run twice on the same training seeds: with reflection and
/// without (the baseline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollectSection {
    /// Training seeds per task type: `seed_start .. seed_start + seeds`. The same seeds
    /// serve the SFT-policy collection and mining; evaluation seeds must not overlap.
    pub seeds: usize,
    /// First training seed.
    pub seed_start: u64,
    /// Attempts per (task, seed).
    pub rounds: usize,
    /// The scripted teacher's rate of every mistake mode (0..1).
    pub mistake_rate: f64,
    /// Retry a success longer than this × the shortest success of the same instance.
    pub detour_factor: f64,
    /// Step limit per attempt.
    pub max_steps: usize,
    /// How the teacher words its thinking: `plain` (default), `progress` (the
    /// plan's last finished part first), `ledger` (every finished part first, goals
    /// in the instruction's words), `checklist` (the last finished part, then what
    /// the instruction still lists), `titled` (`checklist` with the page's title
    /// copied before the next part) or `headed` (`checklist` after the page's
    /// title). Left out of the key when plain.
    #[serde(skip_serializing_if = "TeacherThinking::is_plain")]
    pub thinking: TeacherThinking,
}

impl Default for CollectSection {
    fn default() -> Self {
        CollectSection {
            seeds: 60,
            seed_start: 0,
            rounds: 3,
            mistake_rate: 0.25,
            detour_factor: 1.5,
            max_steps: 10,
            thinking: TeacherThinking::Plain,
        }
    }
}

/// The quality filter's bounds (ALGORITHMS.md §2). MiniWoB tasks take 1–3 steps,
/// so the recipe keeps successes from one effective step up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilterSection {
    /// Fewest effective (not wait/scroll-only) steps.
    pub min_effective_steps: usize,
    /// Most effective steps.
    pub max_effective_steps: usize,
    /// The same action on the same state this many times in a row is a stall.
    pub repeat_limit: usize,
}

impl Default for FilterSection {
    fn default() -> Self {
        FilterSection {
            min_effective_steps: 1,
            max_effective_steps: 30,
            repeat_limit: 3,
        }
    }
}

impl FilterSection {
    /// The curate stage's filter config.
    pub fn to_filter(self) -> crate::curate::filter::FilterConfig {
        crate::curate::filter::FilterConfig {
            min_effective_steps: self.min_effective_steps,
            max_effective_steps: self.max_effective_steps,
            repeat_limit: self.repeat_limit,
        }
    }
}

/// Flattening kept trajectories into SFT samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlattenSection {
    /// Token budget of each prompt (system + user), counted as one token per 4
    /// characters (the tiny preset's tokenizer is trained after flattening). The
    /// local policy renders its prompts with the same budget at evaluation.
    pub token_budget: usize,
    /// The prompt layout of the samples (`rmsweb`, `rmsweb-echo`, `browser-use`);
    /// the local policy renders its prompts in it at evaluation and collection.
    pub format: crate::policy::format::PromptFormat,
}

impl Default for FlattenSection {
    fn default() -> Self {
        FlattenSection {
            token_budget: crate::policy::prompt::DEFAULT_TOKEN_BUDGET,
            format: Default::default(),
        }
    }
}

/// A training stage run as `rmsweb train sft|rl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainSection {
    /// Preset: SFT `tiny`, `tiny-vl`, `lora`, `qwen3-lora` or `qwen3-vl-lora`; RL `tiny` or `paper`.
    pub preset: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// Base model (SFT presets `lora`, `qwen3-lora` and `qwen3-vl-lora` only): the
    /// older spelling of `[model] source`.
    pub model: Option<PathBuf>,
    /// Optimizer steps (SFT: a cap, RL: the number of steps); none keeps the preset's.
    pub steps: Option<usize>,
    /// Overrides of the trainer's config keys (`--set key=value`), e.g.
    /// `set = { epochs = 3, lr = 2e-3 }` or `[sft.set]` with `lora.r = 16`.
    pub set: toml::Table,
}

impl Default for TrainSection {
    fn default() -> Self {
        TrainSection {
            preset: "tiny".into(),
            device: "cpu".into(),
            model: None,
            steps: None,
            set: toml::Table::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSection {
    /// First held-out seed: seeds `seed_start .. seed_start + episodes` of every task
    /// type, never used for training or mining.
    pub seed_start: u64,
    /// Episodes per task type.
    pub episodes: usize,
    /// Step limit per episode.
    pub max_steps: usize,
    /// Sampling temperature of the policy (0 = greedy).
    pub temperature: f64,
    /// Most tokens the policy may generate per step.
    pub max_new_tokens: usize,
    /// `cpu` or `cuda:N` (also for the SFT-policy collection).
    pub device: String,
    /// Save every episode (with screenshots) as a dataset under `eval/<policy>/`,
    /// to browse failures in the workbench.
    pub save_episodes: bool,
    /// Decode under the observation-grounded schema (`rmsweb eval --grounded`):
    /// element indices the prompt shows, typed values spanning the instruction.
    pub grounded: bool,
    /// Episodes played side by side (`rmsweb eval --parallel`), each in its own tab,
    /// their steps decoded together by one batching engine; the SFT policy's
    /// collection (`sft_collect`) plays as many instances side by side. The episodes
    /// are those of one at a time, so it is not part of any stage's key.
    pub parallel: usize,
}

impl Default for EvalSection {
    fn default() -> Self {
        EvalSection {
            seed_start: 10_000,
            episodes: 10,
            max_steps: 10,
            temperature: 0.0,
            max_new_tokens: 512,
            device: "cpu".into(),
            save_episodes: true,
            grounded: false,
            parallel: 1,
        }
    }
}

/// The SFT policy's own attempts on the training seeds; they join the teacher's
/// reflection collection in the mining pool, so the miner pairs a verified teacher
/// success with the SFT policy's failure on the same instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SftCollectSection {
    /// Attempts per (task, seed).
    pub rounds: usize,
    /// Give retries a reflection (the heuristic reflector's).
    pub reflection: bool,
    /// Sampling temperature (0 = greedy; above 0 retries sample afresh).
    pub temperature: f64,
    /// Most tokens the policy may generate per step.
    pub max_new_tokens: usize,
    /// Step limit per attempt.
    pub max_steps: usize,
    /// Training seeds per task type to run (from `collect.seed_start`); none: all.
    pub seeds: Option<usize>,
    /// Decode under the observation-grounded schema, as `eval.grounded`.
    pub grounded: bool,
}

impl Default for SftCollectSection {
    fn default() -> Self {
        SftCollectSection {
            rounds: 1,
            reflection: true,
            temperature: 0.0,
            max_new_tokens: 512,
            max_steps: 10,
            seeds: None,
            grounded: false,
        }
    }
}

/// RL from the SFT checkpoint of the reflection collection, in every variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlSection {
    /// Preset `tiny` or `paper`.
    pub preset: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// RL steps; none keeps the preset's.
    pub steps: Option<usize>,
    /// Variants: a mode (`salvage-ds`, `anchor-free`, `dapo`, `grpo`) on mined
    /// prompts, or `<mode>+full-corpus` on every SFT sample.
    pub variants: Vec<String>,
    /// RL seeds: each variant is trained and evaluated once per seed.
    pub seeds: Vec<u64>,
    /// Overrides of the RL config keys (`--set`), e.g. `set = { n = 8, lr = 1e-3 }`.
    pub set: toml::Table,
    /// How each run's checkpoint is chosen for the held-out evaluation.
    pub validation: ValidationSection,
}

/// Checkpoint choice on validation seeds: every complete checkpoint of an RL run is
/// evaluated on seeds disjoint from the training and held-out ones, and the held-out
/// evaluation takes the best (ties: the earlier step). Off (`episodes = 0`): the
/// run's last checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValidationSection {
    /// Validation episodes per task type and checkpoint; 0 turns the choice off.
    pub episodes: usize,
    /// First validation seed: seeds `seed_start .. seed_start + episodes`.
    pub seed_start: u64,
}

impl Default for ValidationSection {
    fn default() -> Self {
        ValidationSection {
            episodes: 0,
            seed_start: 20_000,
        }
    }
}

impl Default for RlSection {
    fn default() -> Self {
        RlSection {
            preset: "tiny".into(),
            device: "cpu".into(),
            steps: None,
            variants: DEFAULT_VARIANTS.iter().map(|s| s.to_string()).collect(),
            seeds: vec![1],
            set: toml::Table::new(),
            validation: ValidationSection::default(),
        }
    }
}
