//! `recipe.toml`: every knob of the recipe, one section per stage. Unknown keys are
//! refused and every error names the file and the key. The sections of stages the
//! lead's modules configure (`[mine]`, `[sft.set]`, `[rl.set]`) pass through to those
//! modules' own configs and are checked against them when the file is loaded.

use super::base::{BaseModel, ModelSection};
use super::checks::{RL_NEEDS, SFT_NEEDS, check_trainer, recipe_key};
use crate::env::miniwob::task_name;
use crate::mine::MineConfig;
use crate::policy::scripted::ScriptedTeacher;
use crate::train::rl::config::{PromptSource, RlConfig};
use crate::train::rl::groups::Mode;
use crate::train::sft::SftConfig;
use crate::util::sanitize::excerpt;
use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The whole recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeConfig {
    /// MiniWoB++ task types (`click-button` or `miniwob:click-button`); the scripted
    /// teacher must know each one.
    pub tasks: Vec<String>,
    /// The pretrained base model (none: the tiny preset from scratch).
    #[serde(default)]
    pub model: ModelSection,
    #[serde(default)]
    pub env: EnvSection,
    #[serde(default)]
    pub collect: CollectSection,
    #[serde(default)]
    pub filter: FilterSection,
    #[serde(default)]
    pub flatten: FlattenSection,
    #[serde(default)]
    pub sft: TrainSection,
    #[serde(default)]
    pub eval: EvalSection,
    #[serde(default)]
    pub sft_collect: SftCollectSection,
    /// The miner's configuration (`MineConfig` keys; absent: its defaults).
    #[serde(default)]
    pub mine: toml::Table,
    #[serde(default)]
    pub rl: RlSection,
}

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

/// The `--set key=value` arguments of an override table: dotted keys for nested
/// tables, in key order.
pub fn set_args(set: &toml::Table) -> Vec<String> {
    crate::util::toml_keys::dotted(set)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// Evaluation of every trained policy on held-out seeds.
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

/// The variants the issue asks for.
pub const DEFAULT_VARIANTS: [&str; 5] = [
    "salvage-ds",
    "dapo",
    "anchor-free",
    "grpo",
    "salvage-ds+full-corpus",
];

/// One RL variant: a mode on a prompt source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub mode: Mode,
    pub prompts: PromptSource,
}

/// The `--mode` / `--prompts` word of a mode or source.
fn kebab<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Variant {
    /// Parses `salvage-ds` or `dapo+full-corpus`.
    pub fn parse(s: &str) -> Result<Variant> {
        let shown = excerpt(s);
        let (mode, prompts) = match s.split_once('+') {
            Some((m, "full-corpus")) => (m, PromptSource::FullCorpus),
            Some((_, other)) => {
                bail!(
                    "variant `{shown}`: unknown prompt source `{}` (full-corpus)",
                    excerpt(other)
                )
            }
            None => (s, PromptSource::Mined),
        };
        let mode = Mode::from_name(mode).ok_or_else(|| {
            anyhow::anyhow!("variant `{shown}`: unknown mode ({})", Mode::names(", "))
        })?;
        Ok(Variant { mode, prompts })
    }

    /// The `rmsweb train rl --mode` word.
    pub fn mode_arg(&self) -> String {
        self.mode.name().to_string()
    }

    /// The `rmsweb train rl --prompts` word.
    pub fn prompts_arg(&self) -> String {
        kebab(&self.prompts)
    }

    /// The canonical name (`salvage-ds`, `salvage-ds+full-corpus`).
    pub fn name(&self) -> String {
        match self.prompts {
            PromptSource::Mined => self.mode_arg(),
            PromptSource::FullCorpus => format!("{}+full-corpus", self.mode_arg()),
        }
    }
}

/// Training seeds of a collection section.
pub fn seed_range(start: u64, n: usize) -> std::ops::Range<u64> {
    start..start.saturating_add(n as u64)
}

/// Checks that seeds `start .. start + n` exist (the range does not pass the
/// largest seed, 2^64 - 1), naming `key` (the start) otherwise.
fn seeds_fit(key: &str, start: u64, n: usize, what: &str) -> Result<()> {
    ensure!(
        start.checked_add(n as u64).is_some(),
        "key `{key}`: {start} + {n} {what} passes the largest seed (2^64 - 1)"
    );
    Ok(())
}

fn overlaps(a: &std::ops::Range<u64>, b: &std::ops::Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl RecipeConfig {
    /// Reads and checks a recipe file; errors name the file and the key.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::util::fs::read_config(path)?;
        Self::from_toml(&text).with_context(|| format!("{}", path.display()))
    }

    /// Parses and checks recipe TOML text.
    pub fn from_toml(text: &str) -> Result<Self> {
        let de = toml::Deserializer::parse(text)
            .map_err(|e| anyhow::anyhow!("{}", crate::util::toml_error(text, &e)))?;
        let cfg: RecipeConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = excerpt(&e.path().to_string());
            let inner = crate::util::toml_error(text, e.inner());
            if path == "." || path.is_empty() {
                anyhow::anyhow!("{inner}")
            } else {
                anyhow::anyhow!("key `{path}`: {inner}")
            }
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The task types without the `miniwob:` prefix, in order.
    pub fn task_names(&self) -> Vec<String> {
        self.tasks
            .iter()
            .map(|t| task_name(t).to_string())
            .collect()
    }

    /// The parsed RL variants, in order.
    pub fn variants(&self) -> Result<Vec<Variant>> {
        self.rl.variants.iter().map(|v| Variant::parse(v)).collect()
    }

    /// The miner's config.
    pub fn mine_config(&self) -> Result<MineConfig> {
        // From the table itself: a line of re-written text would point nowhere.
        let cfg = MineConfig::deserialize(toml::Value::Table(self.mine.clone()))
            .map_err(|e| anyhow::anyhow!("{}", excerpt(e.message())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The pretrained base model, if any (`[model]`, or `sft.model`).
    pub fn base_model(&self) -> Result<Option<BaseModel>> {
        BaseModel::of(&self.model, self.sft.model.as_deref())
    }

    /// The SFT config the `sft` stage will run with (checks `[sft]` and its `set`):
    /// on `model` when given (the prepared base model's folder), else on the base
    /// model's source.
    pub fn sft_config(&self, dataset: &Path, model: Option<&Path>) -> Result<SftConfig> {
        let base = match model {
            Some(m) => Some(m.to_path_buf()),
            None => self.base_model()?.map(|b| b.source),
        };
        let mut c = SftConfig::preset(&self.sft.preset, dataset, base.as_deref())?;
        c.device = self.sft.device.clone();
        if let Some(s) = self.sft.steps {
            c.max_steps = s;
        }
        c.with_overrides(&set_args(&self.sft.set))
    }

    /// The RL config one variant will run with (checks `[rl]` and its `set`).
    pub fn rl_config(&self, v: Variant, seed: u64, init: &Path, ds: &Path) -> Result<RlConfig> {
        let mut c = RlConfig::preset(&self.rl.preset, v.mode, v.prompts, init, ds)?;
        c.device = self.rl.device.clone();
        c.seed = seed;
        if let Some(s) = self.rl.steps {
            c.steps = s;
        }
        c.with_overrides(&set_args(&self.rl.set))
    }

    /// Checks values and the held-out property of the evaluation seeds.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            !self.tasks.is_empty(),
            "key `tasks`: list at least one task type"
        );
        let names = self.task_names();
        for (i, (raw, t)) in self.tasks.iter().zip(&names).enumerate() {
            ensure!(
                !raw.contains(':') || raw.starts_with("miniwob:"),
                "key `tasks[{i}]`: `{}`: only miniwob:<name> tasks run live",
                excerpt(raw)
            );
            ensure!(
                ScriptedTeacher::supports(t),
                "key `tasks[{i}]`: the scripted teacher does not know `{}` (it knows: {})",
                excerpt(t),
                crate::policy::scripted::SUPPORTED_TASKS.join(", ")
            );
            ensure!(
                !names[..i].contains(t),
                "key `tasks[{i}]`: `{}` is listed twice",
                excerpt(t)
            );
        }
        let c = &self.collect;
        ensure!(c.seeds > 0, "key `collect.seeds`: at least 1");
        ensure!(c.rounds > 0, "key `collect.rounds`: at least 1");
        ensure!(c.max_steps > 0, "key `collect.max_steps`: at least 1");
        ensure!(
            (0.0..=1.0).contains(&c.mistake_rate),
            "key `collect.mistake_rate`: {} is outside 0..1",
            c.mistake_rate
        );
        ensure!(
            c.detour_factor >= 1.0 && c.detour_factor.is_finite(),
            "key `collect.detour_factor`: a number of at least 1"
        );
        let f = &self.filter;
        ensure!(
            f.min_effective_steps <= f.max_effective_steps,
            "key `filter.min_effective_steps`: above `filter.max_effective_steps`"
        );
        ensure!(
            self.flatten.token_budget >= 256,
            "key `flatten.token_budget`: at least 256"
        );
        let e = &self.eval;
        ensure!(e.episodes > 0, "key `eval.episodes`: at least 1");
        ensure!(e.max_steps > 0, "key `eval.max_steps`: at least 1");
        ensure!(
            e.max_new_tokens > 0,
            "key `eval.max_new_tokens`: at least 1"
        );
        ensure!(
            e.temperature >= 0.0 && e.temperature.is_finite(),
            "key `eval.temperature`: 0 or more"
        );
        ensure!(
            (1..=64).contains(&e.parallel),
            "key `eval.parallel`: between 1 and 64"
        );
        if self.base_model()?.is_some() {
            ensure!(
                self.sft.preset != "tiny" && self.sft.preset != "tiny-vl",
                "key `sft.preset`: `{}` trains a model from scratch; a base model \
                 (`model.source`) needs `lora`, `qwen3-lora` or `qwen3-vl-lora`",
                excerpt(&self.sft.preset)
            );
        }
        seeds_fit("collect.seed_start", c.seed_start, c.seeds, "seeds")?;
        seeds_fit("eval.seed_start", e.seed_start, e.episodes, "episodes")?;
        let train = seed_range(c.seed_start, c.seeds);
        let held = seed_range(e.seed_start, e.episodes);
        ensure!(
            !overlaps(&train, &held),
            "key `eval.seed_start`: evaluation seeds {}..{} overlap the training seeds {}..{} \
             (collect.seed_start, collect.seeds); held-out seeds must never be trained or mined on",
            held.start,
            held.end,
            train.start,
            train.end
        );
        let v = &self.rl.validation;
        if v.episodes > 0 {
            seeds_fit(
                "rl.validation.seed_start",
                v.seed_start,
                v.episodes,
                "episodes",
            )?;
            let val = seed_range(v.seed_start, v.episodes);
            for (other, what) in [(&train, "training"), (&held, "held-out evaluation")] {
                ensure!(
                    !overlaps(&val, other),
                    "key `rl.validation.seed_start`: validation seeds {}..{} overlap the {what} \
                     seeds {}..{}; checkpoints must be chosen on seeds of their own",
                    val.start,
                    val.end,
                    other.start,
                    other.end
                );
            }
        }
        let s = &self.sft_collect;
        ensure!(s.rounds > 0, "key `sft_collect.rounds`: at least 1");
        ensure!(s.max_steps > 0, "key `sft_collect.max_steps`: at least 1");
        ensure!(
            s.max_new_tokens > 0,
            "key `sft_collect.max_new_tokens`: at least 1"
        );
        ensure!(
            s.temperature >= 0.0 && s.temperature.is_finite(),
            "key `sft_collect.temperature`: 0 or more"
        );
        if let Some(n) = s.seeds {
            ensure!(
                n > 0 && n <= c.seeds,
                "key `sft_collect.seeds`: between 1 and collect.seeds ({})",
                c.seeds
            );
        }
        self.mine_config().context("key `mine`")?;
        ensure!(
            self.sft.steps != Some(0),
            "key `sft.steps`: 0 is no number of steps (leave the key out to train by epochs)"
        );
        let sft = self
            .sft_config(Path::new("dataset"), None)
            .context("key `sft`")?;
        check_trainer("sft", &self.sft.set, &sft, SFT_NEEDS)?;
        ensure!(
            self.rl.steps != Some(0),
            "key `rl.steps`: at least 1 (a run of 0 steps leaves no checkpoint to evaluate)"
        );
        ensure!(
            !self.rl.seeds.is_empty(),
            "key `rl.seeds`: list at least one seed"
        );
        ensure!(
            !self.rl.set.contains_key("seed"),
            "key `rl.set.seed`: list RL seeds in `rl.seeds` instead"
        );
        for (section, t) in [("sft", &self.sft.set), ("rl", &self.rl.set)] {
            for k in ["dataset", "init", "kind", "preset", "device", "model"] {
                ensure!(
                    !t.contains_key(k),
                    "key `{section}.set.{k}`: set by the recipe (use `{section}.{k}` where it exists)"
                );
            }
        }
        let mut seen = Vec::new();
        for (i, s) in self.rl.seeds.iter().enumerate() {
            ensure!(
                !seen.contains(s),
                "key `rl.seeds[{i}]`: {s} is listed twice"
            );
            seen.push(*s);
        }
        let mut names = Vec::new();
        for (i, v) in self.rl.variants.iter().enumerate() {
            let parsed = Variant::parse(v).with_context(|| format!("key `rl.variants[{i}]`"))?;
            ensure!(
                !names.contains(&parsed.name()),
                "key `rl.variants[{i}]`: `{}` is listed twice",
                excerpt(v)
            );
            names.push(parsed.name());
            let rl = self
                .rl_config(parsed, 1, Path::new("init"), Path::new("dataset"))
                .context("key `rl`")?;
            ensure!(
                rl.steps > 0,
                "key `{}`: at least 1 (a run of 0 steps leaves no checkpoint to evaluate)",
                recipe_key("rl", &self.rl.set, "steps")
            );
            check_trainer("rl", &self.rl.set, &rl, RL_NEEDS)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::policy::format::PromptFormat;
    const MIN: &str = "tasks = [\"click-button\", \"miniwob:enter-text\"]\n";

    fn err(text: &str) -> String {
        format!("{:#}", RecipeConfig::from_toml(text).unwrap_err())
    }

    #[test]
    fn defaults_fill_every_section() {
        let c = RecipeConfig::from_toml(MIN).unwrap();
        assert_eq!(c.task_names(), vec!["click-button", "enter-text"]);
        assert_eq!(c.filter.min_effective_steps, 1);
        assert_eq!(c.collect.seeds, 60);
        assert_eq!(c.eval.seed_start, 10_000);
        assert_eq!(c.variants().unwrap().len(), 5);
        assert_eq!(c.rl.seeds, vec![1]);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = err(&format!("{MIN}[collect]\nseedz = 3\n"));
        assert!(e.contains("collect") && e.contains("seedz"), "{e}");
        let e = err(&format!("{MIN}bogus = 1\n"));
        assert!(e.contains("bogus"), "{e}");
        let e = err(&format!("{MIN}[collect]\nseeds = \"many\"\n"));
        assert!(e.contains("collect.seeds"), "{e}");
        let e = err(&format!("{MIN}[collect]\nmistake_rate = 2.0\n"));
        assert!(e.contains("collect.mistake_rate"), "{e}");
        let e = err("tasks = [\"book-flight\"]\n");
        assert!(e.contains("tasks[0]") && e.contains("book-flight"), "{e}");
        let e = err(&format!("{MIN}[mine]\nmin_scor = 0.1\n"));
        assert!(e.contains("mine") && e.contains("min_scor"), "{e}");
        let e = err(&format!("{MIN}[sft.set]\nepochz = 2\n"));
        assert!(e.contains("sft") && e.contains("epochz"), "{e}");
        let e = err(&format!("{MIN}[rl.set]\nn = 1\n"));
        assert!(e.contains("rl") && e.contains("`n`"), "{e}");
        let e = err(&format!("{MIN}[rl]\nvariants = [\"ppo\"]\n"));
        assert!(e.contains("rl.variants[0]") && e.contains("ppo"), "{e}");
        let e = err(&format!("{MIN}[rl]\nvariants = [\"dapo+all\"]\n"));
        assert!(e.contains("all"), "{e}");
        let e = err(&format!("{MIN}[flatten]\nformat = \"echo\"\n"));
        assert!(
            e.contains("flatten.format") && e.contains("rmsweb-echo"),
            "{e}"
        );
    }

    #[test]
    fn the_prompt_layout_is_chosen_once_for_samples_and_the_local_policy() {
        let c = RecipeConfig::from_toml(MIN).unwrap();
        assert_eq!(c.flatten.format, PromptFormat::Rmsweb);
        let c = RecipeConfig::from_toml(&format!("{MIN}[flatten]\nformat = \"rmsweb-echo\"\n"))
            .unwrap();
        assert_eq!(c.flatten.format, PromptFormat::RmswebEcho);
    }

    #[test]
    fn a_base_model_needs_a_lora_preset_and_parallel_is_bounded() {
        let e = err(&format!("{MIN}[model]\nsource = \"/m/x.gguf\"\n"));
        assert!(e.contains("sft.preset") && e.contains("tiny"), "{e}");
        let c = RecipeConfig::from_toml(&format!(
            "{MIN}[model]\nsource = \"/m/x.gguf\"\nlayers = 2\n[sft]\npreset = \"lora\"\n"
        ))
        .unwrap();
        let b = c.base_model().unwrap().unwrap();
        assert_eq!((b.is_file(), b.layers), (true, Some(2)));
        let e = err(&format!(
            "{MIN}[model]\nsource = \"/a.gguf\"\n[sft]\npreset = \"lora\"\nmodel = \"/b\"\n"
        ));
        assert!(e.contains("sft.model"), "{e}");
        for n in [0, 65] {
            let e = err(&format!("{MIN}[eval]\nparallel = {n}\n"));
            assert!(e.contains("eval.parallel"), "{e}");
        }
        let e = err(&format!("{MIN}[model]\nsourse = \"/m\"\n"));
        assert!(e.contains("sourse"), "{e}");
    }

    #[test]
    fn evaluation_seeds_must_be_held_out() {
        let e = err(&format!(
            "{MIN}[collect]\nseeds = 20\nseed_start = 0\n[eval]\nseed_start = 15\nepisodes = 10\n"
        ));
        assert!(
            e.contains("eval.seed_start") && e.contains("overlap"),
            "{e}"
        );
        // Adjacent ranges are fine.
        RecipeConfig::from_toml(&format!(
            "{MIN}[collect]\nseeds = 20\n[eval]\nseed_start = 20\nepisodes = 10\n"
        ))
        .unwrap();
    }

    #[test]
    fn validation_seeds_must_be_their_own() {
        // Off by default: nothing to check.
        let c = RecipeConfig::from_toml(MIN).unwrap();
        assert_eq!(c.rl.validation.episodes, 0);
        for (start, what) in [(5, "training"), (10_003, "held-out")] {
            let e = err(&format!(
                "{MIN}[rl.validation]\nepisodes = 4\nseed_start = {start}\n"
            ));
            assert!(
                e.contains("rl.validation.seed_start") && e.contains(what),
                "{e}"
            );
        }
        let c = RecipeConfig::from_toml(&format!(
            "{MIN}[rl.validation]\nepisodes = 4\nseed_start = 10010\n"
        ))
        .unwrap();
        assert_eq!(c.rl.validation.seed_start, 10_010);
        let e = err(&format!("{MIN}[rl.validation]\nepisode = 4\n"));
        assert!(e.contains("episode"), "{e}");
    }

    #[test]
    fn overrides_become_set_arguments_and_reach_the_trainers() {
        let c = RecipeConfig::from_toml(&format!(
            "{MIN}[sft]\nsteps = 7\n[sft.set]\nepochs = 2\nlr = 0.001\n[rl]\nsteps = 3\nseeds = [4]\n[rl.set]\nn = 4\nlora = {{ r = 4 }}\n"
        ))
        .unwrap();
        assert_eq!(set_args(&c.sft.set), vec!["epochs=2", "lr=0.001"]);
        assert_eq!(set_args(&c.rl.set), vec!["lora.r=4", "n=4"]);
        let s = c.sft_config(Path::new("d"), None).unwrap();
        assert_eq!((s.max_steps, s.epochs, s.lr), (7, 2, 0.001));
        let v = Variant::parse("dapo+full-corpus").unwrap();
        assert_eq!(v.name(), "dapo+full-corpus");
        assert_eq!(
            (v.mode_arg(), v.prompts_arg()),
            ("dapo".into(), "full-corpus".into())
        );
        let r = c.rl_config(v, 4, Path::new("i"), Path::new("d")).unwrap();
        assert_eq!((r.steps, r.n, r.lora.r, r.seed), (3, 4, 4, 4));
        assert_eq!(r.mode, Mode::Dapo);
    }
}
