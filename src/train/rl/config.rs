//! The resolved configuration of a Salvage-DS RL run (`run.toml`, `kind = "rl"`):
//! every hyper-parameter of ALGORITHMS.md §5, with the `paper` and `tiny` presets and
//! the per-mode clip ranges and salvage weight.

use super::groups::{GateConfig, Mode};
use super::loss::LossConfig;
use super::sharpening::SharpeningConfig;
use crate::model::LoraConfig;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where RL prompts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PromptSource {
    /// One prompt per mined pair (`mined/pairs.jsonl`): the success-side state.
    Mined,
    /// Every action sample of the flattened SFT corpus (`sft/samples.jsonl`).
    FullCorpus,
}

/// Which response tokens of an RL sequence carry the policy-gradient loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PgTokens {
    /// Every response token (ALGORITHMS.md §5, verl's `response_mask`).
    #[default]
    Response,
    /// The action and what follows it (closing brackets, stop token); the free text
    /// before it (thinking, memory, goals), which the rubric never reads, gets the KL
    /// term only. Each sequence's sum still divides by all its response tokens, so an
    /// action token weighs what it weighs under `response`. A response whose action
    /// does not parse keeps every token.
    Action,
}

/// Every hyper-parameter of an RL run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RlConfig {
    /// Always `rl` (dispatch key of `rmsweb train resume`).
    pub kind: String,
    pub preset: String,
    pub mode: Mode,
    pub prompts: PromptSource,
    /// The SFT run folder (its latest checkpoint) or a checkpoint folder.
    pub init: PathBuf,
    pub dataset: PathBuf,
    pub device: String,
    pub seed: u64,
    /// Optimizer steps (each: sample, gate, refill, then `train_batch / mini_batch`
    /// updates).
    pub steps: usize,
    /// Rollouts per prompt (group size).
    pub n: usize,
    /// ε_σ of the std gate.
    pub eps_sigma: f64,
    /// r_comp of the competence gate.
    pub r_comp: f64,
    /// Accepted groups per step.
    pub train_batch: usize,
    /// Groups per policy update.
    pub mini_batch: usize,
    /// Sequences per forward/backward pass (gradient accumulation inside a mini-batch;
    /// only memory changes with it).
    pub micro_batch: usize,
    /// Prompts per generation batch of the refill loop.
    pub gen_batch: usize,
    /// Refill cap: generation batches drawn at most per step.
    pub max_gen_batches: usize,
    /// ε_low: ratio clipped below at 1 − clip_low.
    pub clip_low: f64,
    /// ε_high: ratio clipped above at 1 + clip_high.
    pub clip_high: f64,
    /// Dual-clip constant for negative advantages (0 disables it).
    pub dual_clip: f64,
    /// β of the k3 KL to the frozen SFT reference.
    pub kl_coef: f64,
    /// The tokens the policy-gradient term covers (the KL term covers every response
    /// token either way). An ablation: `action` was meant to keep the unrewarded free
    /// text from drifting, and did the opposite. Salvage-DS, tiny preset, 80 steps
    /// (issue #15 note): KL 1.79 and rollout log-ppl 3.8 over steps 61-80 against
    /// 0.30-1.02 and 0.6-2.2 with `response`, held-out pass@1 0.39 against 0.56-0.61;
    /// the free text reinforced with the rewarded actions is what held it in place.
    #[serde(default)]
    pub pg_tokens: PgTokens,
    /// λ of the action-only salvage NLL (0 in every mode but salvage-ds).
    pub salvage_coef: f64,
    /// Salvage rule `S = unit·⌊min(D, cap)/unit⌋`: the paper's 16 (its mini-batch).
    pub salvage_unit: usize,
    /// The rule's cap: the paper's 64 (its train batch).
    pub salvage_cap: usize,
    pub lr: f64,
    /// `constant` (verl's default) or `cosine` (with warmup).
    pub lr_schedule: String,
    pub warmup_ratio: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    /// The new RL adapter (on the attention q, k, v and o projections).
    pub lora: LoraConfig,
    /// Sampling temperature; log-probabilities are taken at the same temperature.
    pub temperature: f64,
    pub top_p: f64,
    pub max_new_tokens: usize,
    /// Decode rollouts under the observation-grounded schema (`rmsweb eval
    /// --grounded`: element indices the prompt shows, typed values and quoted spans
    /// the instruction's): the groups then differ only in choices the grounded
    /// policy can make. Old log-probabilities stay the model's own (unconstrained)
    /// at the temperature, the ones the update recomputes.
    #[serde(default)]
    pub grounded: bool,
    /// Rollouts decoded together at most (several groups share a decoding batch;
    /// only speed and memory change with it).
    #[serde(default = "default_decode_rows")]
    pub decode_rows: usize,
    /// Prompts longer than this (tokens) keep their last `max_prompt_tokens` tokens.
    pub max_prompt_tokens: usize,
    /// Save a checkpoint every this many steps (and at the end).
    pub checkpoint_every: usize,
    /// Sampled groups probed for the log-prob of correct vs wrong actions per step.
    pub probe_groups: usize,
    pub sharpening: SharpeningConfig,
}

fn default_decode_rows() -> usize {
    64
}

fn clip_for(mode: Mode) -> (f64, f64) {
    match mode {
        Mode::SalvageDs | Mode::AnchorFree => (0.2, 0.32),
        Mode::Dapo => (0.2, 0.28),
        Mode::Grpo => (0.2, 0.2),
    }
}

impl RlConfig {
    /// The named preset for `mode`: `paper` (ALGORITHMS.md §5's values) or `tiny`
    /// (scaled down to run in seconds per step on a CPU).
    // Kept whole: the paper's values and the tiny preset's side by side, so each
    // scaled-down value is read against the one it scales.
    pub fn preset(
        name: &str,
        mode: Mode,
        prompts: PromptSource,
        init: &Path,
        dataset: &Path,
    ) -> Result<Self> {
        let (clip_low, clip_high) = clip_for(mode);
        let attention = ["q_proj", "k_proj", "v_proj", "o_proj"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>();
        let paper = RlConfig {
            kind: "rl".into(),
            preset: name.into(),
            mode,
            prompts,
            init: init.to_path_buf(),
            dataset: dataset.to_path_buf(),
            device: "cpu".into(),
            seed: 42,
            steps: 100,
            n: 8,
            eps_sigma: 0.10,
            r_comp: 0.55,
            train_batch: 64,
            mini_batch: 16,
            micro_batch: 8,
            gen_batch: 64,
            max_gen_batches: 16,
            clip_low,
            clip_high,
            dual_clip: 3.0,
            kl_coef: 1e-3,
            pg_tokens: PgTokens::Response,
            salvage_coef: if mode.salvages() { 0.10 } else { 0.0 },
            salvage_unit: 16,
            salvage_cap: 64,
            lr: 8e-6,
            lr_schedule: "constant".into(),
            warmup_ratio: 0.0,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            lora: LoraConfig {
                r: 64,
                alpha: 128.0,
                dropout: 0.0,
                target_modules: attention,
            },
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens: 512,
            grounded: false,
            decode_rows: 64,
            max_prompt_tokens: 12_000,
            checkpoint_every: 20,
            probe_groups: 16,
            sharpening: SharpeningConfig::default(),
        };
        match name {
            "paper" => Ok(paper),
            "tiny" => Ok(RlConfig {
                steps: 20,
                train_batch: 8,
                mini_batch: 4,
                micro_batch: 16,
                gen_batch: 8,
                max_gen_batches: 4,
                salvage_unit: 4,
                salvage_cap: 8,
                // Adam moves every adapter weight by ~lr per update: on a tiny model
                // 1e-2 wrecks the policy within a few steps, 1e-3 learns steadily.
                lr: 1e-3,
                lora: LoraConfig {
                    r: 8,
                    alpha: 16.0,
                    ..paper.lora.clone()
                },
                max_new_tokens: 96,
                // A whole generation batch decodes together (finished rows leave
                // the batch): on live MiniWoB prompts, 2 cores, generation took 21%
                // less time than one group at a time (32.4 vs 41.1 s over 4 steps).
                // Prompts of different lengths still reuse the shared prefix (each
                // encodes only its rest, its keys turned by its padding).
                decode_rows: 64,
                max_prompt_tokens: 1024,
                checkpoint_every: 10,
                probe_groups: 8,
                sharpening: SharpeningConfig {
                    window: 8,
                    ..SharpeningConfig::default()
                },
                ..paper
            }),
            _ => anyhow::bail!(
                "unknown preset `{}` (tiny, paper)",
                crate::util::sanitize::excerpt(name)
            ),
        }
    }

    /// Applies `--set key=value` overrides (see [`crate::train::run::apply_overrides`]).
    pub fn with_overrides(self, sets: &[String]) -> Result<Self> {
        let text = crate::train::run::apply_overrides(&self, sets)?;
        let cfg: RlConfig =
            crate::util::from_toml_text(&text, false).context("after --set overrides")?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses and checks `run.toml`; errors name the field.
    pub fn from_toml(text: &str) -> Result<Self> {
        let cfg: RlConfig = crate::util::from_toml_text(text, true)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges that would otherwise fail deep inside a step.
    pub fn validate(&self) -> Result<()> {
        use anyhow::ensure;
        ensure!(self.kind == "rl", "field `kind`: expected \"rl\"");
        ensure!(self.n >= 2, "field `n`: a group needs at least 2 rollouts");
        ensure!(
            self.train_batch > 0 && self.mini_batch > 0 && self.micro_batch > 0,
            "fields `train_batch`, `mini_batch`, `micro_batch` must be positive"
        );
        ensure!(
            self.mini_batch <= self.train_batch,
            "field `mini_batch`: larger than `train_batch`"
        );
        ensure!(self.gen_batch > 0, "field `gen_batch` must be positive");
        ensure!(
            self.max_gen_batches > 0,
            "field `max_gen_batches` must be positive"
        );
        ensure!(
            self.temperature > 0.0,
            "field `temperature`: must be positive (log-probs are taken at it)"
        );
        ensure!(
            self.top_p > 0.0 && self.top_p <= 1.0,
            "field `top_p`: must be in (0, 1]"
        );
        ensure!(
            self.max_new_tokens > 0,
            "field `max_new_tokens` must be positive"
        );
        ensure!(
            self.max_prompt_tokens >= 2,
            "field `max_prompt_tokens` must be at least 2"
        );
        ensure!(
            self.clip_low > 0.0 && self.clip_low < 1.0 && self.clip_high > 0.0,
            "fields `clip_low` / `clip_high`: expected 0 < clip_low < 1 and clip_high > 0"
        );
        ensure!(
            self.dual_clip == 0.0 || self.dual_clip > 1.0,
            "field `dual_clip`: 0 (off) or a constant above 1"
        );
        ensure!(
            matches!(self.lr_schedule.as_str(), "constant" | "cosine"),
            "field `lr_schedule`: `constant` or `cosine`"
        );
        ensure!(self.lora.r > 0, "field `lora.r` must be positive");
        // The update's ratios compare log-probs with those the rollouts were scored
        // with; masks drawn on one side only would read as policy change.
        ensure!(
            self.lora.dropout == 0.0,
            "field `lora.dropout`: RL trains its adapters without dropout (the update's \
             log-probs must match the rollouts'); set 0"
        );
        ensure!(
            self.sharpening.window >= 3,
            "field `sharpening.window`: at least 3 steps"
        );
        Ok(())
    }

    /// The gate thresholds and mode.
    pub fn gate(&self) -> GateConfig {
        GateConfig {
            eps_sigma: self.eps_sigma,
            r_comp: self.r_comp,
            mode: self.mode,
        }
    }

    /// The loss coefficients; the salvage weight is 0 in every mode but salvage-ds.
    pub fn loss(&self) -> LossConfig {
        LossConfig {
            clip_low: self.clip_low,
            clip_high: self.clip_high,
            dual_clip: (self.dual_clip > 0.0).then_some(self.dual_clip),
            kl_coef: self.kl_coef,
            salvage_coef: if self.mode.salvages() {
                self.salvage_coef
            } else {
                0.0
            },
        }
    }

    /// Policy updates per step.
    pub fn updates_per_step(&self) -> usize {
        self.train_batch.div_ceil(self.mini_batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(mode: Mode) -> RlConfig {
        RlConfig::preset(
            "paper",
            mode,
            PromptSource::Mined,
            Path::new("runs/sft"),
            Path::new("ds"),
        )
        .unwrap()
    }

    #[test]
    fn paper_preset_holds_the_papers_values_and_modes_wire_clip_and_weight() {
        let c = preset(Mode::SalvageDs);
        assert_eq!((c.n, c.train_batch, c.mini_batch), (8, 64, 16));
        assert_eq!((c.max_gen_batches, c.updates_per_step()), (16, 4));
        assert_eq!((c.lora.r, c.lora.alpha), (64, 128.0));
        assert_eq!(
            c.lora.target_modules,
            vec!["q_proj", "k_proj", "v_proj", "o_proj"]
        );
        assert_eq!(c.lr, 8e-6);
        assert_eq!((c.salvage_unit, c.salvage_cap), (16, 64));
        let l = c.loss();
        assert_eq!(
            (
                l.clip_low,
                l.clip_high,
                l.dual_clip,
                l.kl_coef,
                l.salvage_coef
            ),
            (0.2, 0.32, Some(3.0), 1e-3, 0.10)
        );
        let g = c.gate();
        assert_eq!((g.eps_sigma, g.r_comp), (0.10, 0.55));
        let af = preset(Mode::AnchorFree).loss();
        assert_eq!((af.clip_high, af.salvage_coef), (0.32, 0.0));
        let dapo = preset(Mode::Dapo).loss();
        assert_eq!(
            (dapo.clip_low, dapo.clip_high, dapo.salvage_coef),
            (0.2, 0.28, 0.0)
        );
        let grpo = preset(Mode::Grpo).loss();
        assert_eq!(
            (grpo.clip_low, grpo.clip_high, grpo.salvage_coef),
            (0.2, 0.2, 0.0)
        );
        // A salvage weight set by hand does not leak into a mode without salvage.
        let forced = preset(Mode::Dapo)
            .with_overrides(&["salvage_coef=0.5".into()])
            .unwrap();
        assert_eq!(forced.loss().salvage_coef, 0.0);
    }

    #[test]
    fn run_toml_roundtrips_and_bad_fields_are_named() {
        let c = RlConfig::preset(
            "tiny",
            Mode::Grpo,
            PromptSource::FullCorpus,
            Path::new("runs/sft"),
            Path::new("ds"),
        )
        .unwrap();
        let text = toml::to_string_pretty(&c).unwrap();
        assert!(text.contains("kind = \"rl\""), "{text}");
        assert!(text.contains("mode = \"grpo\""), "{text}");
        assert!(text.contains("prompts = \"full-corpus\""), "{text}");
        assert_eq!(RlConfig::from_toml(&text).unwrap(), c);
        let bad = text.replace("n = 8", "n = \"eight\"");
        let e = format!("{:#}", RlConfig::from_toml(&bad).unwrap_err());
        assert!(e.contains("`n`"), "{e}");
        let e = format!(
            "{:#}",
            c.clone().with_overrides(&["nope=1".into()]).unwrap_err()
        );
        assert!(e.contains("unknown key `nope`"), "{e}");
        let e = format!(
            "{:#}",
            c.clone().with_overrides(&["n=1".into()]).unwrap_err()
        );
        assert!(e.contains("`n`"), "{e}");
        let m = c
            .with_overrides(&["mode=dapo".into(), "lora.r=4".into()])
            .unwrap();
        assert_eq!((m.mode, m.lora.r), (Mode::Dapo, 4));
        // Adapter dropout is refused by name, not silently never drawn.
        let e = format!(
            "{:#}",
            m.with_overrides(&["lora.dropout=0.05".into()]).unwrap_err()
        );
        assert!(e.contains("`lora.dropout`"), "{e}");
    }
}
