//! The configuration of an SFT run (`run.toml`) and its named presets.

use crate::model::LoraConfig;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Shape of the `tiny` preset's model (its vocabulary is the trained BPE's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TinyModel {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    /// Fewest occurrences of a pair for the BPE to merge it (see
    /// [`train_bpe`](crate::model::tokenizer::train_bpe)); run folders written before
    /// this key merged at 2.
    #[serde(default = "default_bpe_min_frequency")]
    pub bpe_min_frequency: u64,
}

fn default_bpe_min_frequency() -> u64 {
    2
}

/// The vision tower of the `tiny-vl` preset (a Qwen3-VL model trained from scratch on
/// screenshot + DOM prompts), and how its screenshots are resized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TinyVision {
    pub depth: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_heads: usize,
    pub patch_size: usize,
    pub spatial_merge_size: usize,
    pub num_position_embeddings: usize,
    /// Tower blocks whose features feed the first decoder layers (DeepStack).
    pub deepstack_visual_indexes: Vec<usize>,
    /// Resized screenshots hold between `min_pixels` and `max_pixels` pixels.
    pub min_pixels: usize,
    pub max_pixels: usize,
    /// Rotary frequencies per (temporal, height, width) axis of the decoder.
    pub mrope_section: [usize; 3],
}

impl TinyVision {
    /// The image preprocessing of these settings (Qwen3-VL's otherwise).
    pub fn image_config(&self) -> crate::model::vl::VlImageConfig {
        crate::model::vl::VlImageConfig {
            patch_size: self.patch_size,
            merge_size: self.spatial_merge_size,
            min_pixels: self.min_pixels,
            max_pixels: self.max_pixels,
            ..crate::model::vl::VlImageConfig::qwen3_vl()
        }
    }
}

/// The full resolved configuration of an SFT run (written to `run.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftConfig {
    pub kind: String,
    pub preset: String,
    pub dataset: PathBuf,
    /// Base model folder (lora, qwen3-lora, qwen3-vl-lora): an HF folder of a family
    /// rmsweb runs (Qwen3, Llama) or a Qwen3-VL folder.
    #[serde(default)]
    pub model: Option<PathBuf>,
    pub device: String,
    /// `auto` (bf16 for LoRA on CUDA, else f32), `f32` or `bf16`.
    pub dtype: String,
    pub seed: u64,
    pub epochs: usize,
    /// Cap on optimizer steps (0: no cap).
    pub max_steps: usize,
    pub lr: f64,
    pub weight_decay: f64,
    pub warmup_ratio: f64,
    pub max_grad_norm: f64,
    pub micro_batch: usize,
    pub grad_accum: usize,
    /// Longest sequence in tokens; longer samples keep their last `context` tokens.
    pub context: usize,
    /// Weight of the loss on the tokens outside the assistant turns (system and user
    /// text): 0 trains on assistant tokens only (ALGORITHMS.md §6). The `tiny` preset,
    /// trained from scratch with no pretraining, also learns the observation language
    /// at a lower weight; `sft/loss` stays the assistant tokens' mean NLL.
    #[serde(default)]
    pub prompt_loss_weight: f64,
    /// Probability that a sample is drawn with its instance values renamed
    /// ([`super::augment`]): the instruction's values, renamed consistently in the
    /// element list, history and answer, so the model learns to copy them rather than
    /// memorize them. 0 trains on the samples as they are.
    #[serde(default)]
    pub augment_values: f64,
    /// Save a checkpoint every this many optimizer steps (and at the end).
    pub checkpoint_every: usize,
    #[serde(default)]
    pub lora: Option<LoraConfig>,
    #[serde(default)]
    pub tiny: Option<TinyModel>,
    /// A vision tower beside the tiny decoder (`tiny-vl`): each sample's screenshot
    /// goes into its last user message.
    #[serde(default)]
    pub vision: Option<TinyVision>,
    /// Screenshot cap of a Qwen3-VL base model (`model`): resized to at most this many
    /// pixels (`qwen3-vl-lora`: the paper's 262,144); none: the base's own
    /// `preprocessor_config.json`. Checkpoints keep the setting, so evaluation sees
    /// what training saw.
    #[serde(default)]
    pub max_pixels: Option<usize>,
}

impl SftConfig {
    /// The named preset: `tiny` (CPU, full training of a ~4M-parameter model with a
    /// BPE trained on the dataset), `tiny-vl` (the same decoder with a small vision
    /// tower that sees each step's screenshot), `lora` (LoRA sized for a ~135M
    /// pretrained model, any family), `qwen3-lora` (the paper's recipe,
    /// ALGORITHMS.md §6) or `qwen3-vl-lora` (the same on a Qwen3-VL base that sees
    /// each step's screenshot, at most 262,144 pixels).
    // Kept whole: every preset's values side by side, so they are compared at a glance.
    pub fn preset(name: &str, dataset: &Path, model: Option<&Path>) -> Result<Self> {
        let base = SftConfig {
            kind: "sft".into(),
            preset: name.into(),
            dataset: dataset.to_path_buf(),
            model: model.map(Path::to_path_buf),
            device: "cpu".into(),
            dtype: "auto".into(),
            seed: 42,
            epochs: 3,
            max_steps: 0,
            lr: 1e-4,
            weight_decay: 0.01,
            warmup_ratio: 0.03,
            max_grad_norm: 1.0,
            micro_batch: 1,
            grad_accum: 32,
            context: 12_000,
            prompt_loss_weight: 0.0,
            augment_values: 0.0,
            checkpoint_every: 100,
            lora: None,
            tiny: None,
            vision: None,
            max_pixels: None,
        };
        let tiny = SftConfig {
            lr: 2e-3,
            micro_batch: 4,
            grad_accum: 2,
            context: 1024,
            checkpoint_every: 50,
            tiny: Some(TinyModel {
                vocab_size: 4096,
                hidden_size: 256,
                num_hidden_layers: 4,
                num_attention_heads: 4,
                num_key_value_heads: 2,
                head_dim: 64,
                intermediate_size: 768,
                bpe_min_frequency: 64,
            }),
            ..base.clone()
        };
        match name {
            "tiny" => Ok(tiny),
            // The tiny decoder with a 2-block tower over 16-px patches: a MiniWoB
            // screenshot (160x210) becomes 160x224 pixels, 35 image tokens.
            "tiny-vl" => Ok(SftConfig {
                vision: Some(TinyVision {
                    depth: 2,
                    hidden_size: 128,
                    intermediate_size: 256,
                    num_heads: 4,
                    patch_size: 16,
                    spatial_merge_size: 2,
                    num_position_embeddings: 256,
                    deepstack_visual_indexes: vec![0],
                    min_pixels: 16_384,
                    max_pixels: crate::model::vl::preprocess::PAPER_MAX_PIXELS,
                    mrope_section: [12, 10, 10],
                }),
                ..tiny
            }),
            "qwen3-lora" => {
                anyhow::ensure!(model.is_some(), "preset qwen3-lora needs --model DIR");
                Ok(SftConfig {
                    lora: Some(LoraConfig::paper()),
                    ..base
                })
            }
            // LoRA on every decoder linear of a small pretrained text model of any
            // family (SmolLM2-135M-Instruct imported by `rmsweb model import`), sized
            // for a CPU: see LoraConfig::small for the adapter and lr 2e-4 for its
            // reasons; the paper's effective batch of 32; contexts of rmsweb's
            // prompts (about 550 tokens) and answers fit 2,048.
            "lora" => {
                let dir = model.context(
                    "preset lora needs --model DIR (a transformers folder; `rmsweb model \
                     import FILE.gguf --out DIR` makes one from a GGUF)",
                )?;
                anyhow::ensure!(
                    !crate::model::vl::is_vl_folder(dir),
                    "preset lora: {} is a Qwen3-VL model; use qwen3-vl-lora",
                    dir.display()
                );
                Ok(SftConfig {
                    lora: Some(LoraConfig::small()),
                    lr: 2e-4,
                    micro_batch: 4,
                    grad_accum: 8,
                    context: 2048,
                    checkpoint_every: 50,
                    ..base
                })
            }
            // The paper's policy: LoRA r64/α128 on the decoder's linear layers of a
            // Qwen3-VL model (the tower frozen), screenshots capped at 262,144 px.
            "qwen3-vl-lora" => {
                let dir = model.context("preset qwen3-vl-lora needs --model DIR")?;
                anyhow::ensure!(
                    crate::model::vl::is_vl_folder(dir),
                    "preset qwen3-vl-lora: {} is not a Qwen3-VL model (its config.json has no \
                     `vision_config`); use qwen3-lora for a text model",
                    dir.join("config.json").display()
                );
                Ok(SftConfig {
                    lora: Some(LoraConfig::paper()),
                    max_pixels: Some(crate::model::vl::preprocess::PAPER_MAX_PIXELS),
                    ..base
                })
            }
            _ => {
                anyhow::bail!(
                    "unknown preset `{}` (tiny, tiny-vl, lora, qwen3-lora, qwen3-vl-lora)",
                    crate::util::sanitize::excerpt(name)
                )
            }
        }
    }

    /// Applies `key=value` overrides (dotted keys, TOML values; bare words are strings).
    pub fn with_overrides(self, sets: &[String]) -> Result<Self> {
        let text = super::run::apply_overrides(&self, sets)?;
        Self::checked(crate::util::from_toml_text(&text, false).context("after --set overrides")?)
    }

    /// Parses `run.toml`.
    pub fn from_toml(text: &str) -> Result<Self> {
        Self::checked(crate::util::from_toml_text(text, true)?)
    }

    /// Checks what deserializing does not.
    fn checked(cfg: SftConfig) -> Result<Self> {
        anyhow::ensure!(
            cfg.micro_batch > 0 && cfg.grad_accum > 0,
            "micro_batch and grad_accum must be positive"
        );
        anyhow::ensure!(cfg.context >= 2, "context must be at least 2 tokens");
        anyhow::ensure!(cfg.epochs > 0, "epochs must be positive");
        anyhow::ensure!(
            (0.0..=1.0).contains(&cfg.augment_values),
            "field `augment_values`: must be a probability in 0..=1, got {}",
            cfg.augment_values
        );
        anyhow::ensure!(
            cfg.prompt_loss_weight.is_finite() && cfg.prompt_loss_weight >= 0.0,
            "field `prompt_loss_weight`: must be a finite number >= 0, got {}",
            cfg.prompt_loss_weight
        );
        Ok(cfg)
    }

    /// Samples per optimizer step.
    pub fn effective_batch(&self) -> usize {
        self.micro_batch * self.grad_accum
    }
}
