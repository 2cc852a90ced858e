//! `recipe.toml`: every knob of the recipe, one section per stage. Unknown keys are
//! refused and every error names the file and the key. The sections of stages the
//! lead's modules configure (`[mine]`, `[sft.set]`, `[rl.set]`) pass through to those
//! modules' own configs and are checked against them when the file is loaded.
//!
//! The stage sections are in `sections`, the RL variants in `variant`; the whole
//! file, its loading and its checks are here.

mod sections;
mod variant;

pub use sections::*;
pub use variant::{DEFAULT_VARIANTS, Variant};

use super::base::{BaseModel, ModelSection};
use super::checks::{RL_NEEDS, SFT_NEEDS, check_trainer, recipe_key};
use crate::env::miniwob::task_name;
use crate::mine::MineConfig;
use crate::policy::scripted::ScriptedTeacher;
use crate::train::rl::config::RlConfig;
use crate::train::sft::SftConfig;
use crate::util::sanitize::excerpt;
use anyhow::{Context, Result, ensure};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// The `--set key=value` arguments of an override table: dotted keys for nested
/// tables, in key order.
pub fn set_args(set: &toml::Table) -> Vec<String> {
    crate::util::toml_keys::dotted(set)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
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
        self.check_tasks()?;
        self.check_teacher_data()?;
        let e = &self.eval;
        ensure!(e.episodes > 0, "key `eval.episodes`: at least 1");
        check_playing("eval", e.max_steps, e.max_new_tokens, e.temperature)?;
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
        self.check_seeds()?;
        let s = &self.sft_collect;
        ensure!(s.rounds > 0, "key `sft_collect.rounds`: at least 1");
        check_playing("sft_collect", s.max_steps, s.max_new_tokens, s.temperature)?;
        if let Some(n) = s.seeds {
            ensure!(
                n > 0 && n <= self.collect.seeds,
                "key `sft_collect.seeds`: between 1 and collect.seeds ({})",
                self.collect.seeds
            );
        }
        self.mine_config().context("key `mine`")?;
        self.check_trainers()
    }

    /// `tasks`: at least one, each a MiniWoB task the scripted teacher knows, none
    /// twice.
    fn check_tasks(&self) -> Result<()> {
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
        Ok(())
    }

    /// `[collect]`, `[filter]` and `[flatten]`: the teacher's data and its curation.
    fn check_teacher_data(&self) -> Result<()> {
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
        Ok(())
    }

    /// The seed ranges: each fits in u64, and training, held-out evaluation and RL
    /// validation seeds never overlap.
    fn check_seeds(&self) -> Result<()> {
        let (c, e) = (&self.collect, &self.eval);
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
        if v.episodes == 0 {
            return Ok(());
        }
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
        Ok(())
    }

    /// `[sft]` and `[rl]`: the trainer configs they build (presets with their `set`
    /// overrides), the keys the recipe sets itself, RL seeds and variants.
    fn check_trainers(&self) -> Result<()> {
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

/// The checks `[eval]` and `[sft_collect]` share: a policy playing episodes needs
/// steps, tokens to answer with and a finite temperature of 0 or more.
fn check_playing(
    section: &str,
    max_steps: usize,
    max_new_tokens: usize,
    temperature: f64,
) -> Result<()> {
    ensure!(max_steps > 0, "key `{section}.max_steps`: at least 1");
    ensure!(
        max_new_tokens > 0,
        "key `{section}.max_new_tokens`: at least 1"
    );
    ensure!(
        temperature >= 0.0 && temperature.is_finite(),
        "key `{section}.temperature`: 0 or more"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
