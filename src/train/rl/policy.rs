//! The policy under RL: the SFT checkpoint's model (frozen, SFT adapter merged), its
//! tokenizer and chat template, and a fresh RL adapter.
use super::config::RlConfig;
use super::prompts::RlPrompt;
use crate::model::{ChatTemplate, LocalModelPolicy, Qwen3, parse_device, tokenizer};
use crate::train::run::RunDir;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// The model being trained, its tokenizer and stop tokens.
pub struct Policy {
    pub model: Qwen3,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    pub stop: Vec<u32>,
    /// The init checkpoint is a full model folder (a tiny SFT run): checkpoints then
    /// also hold the merged RL model, loadable as a model folder.
    pub full_model_init: bool,
    pub init_checkpoint: PathBuf,
    /// The SFT adapter of a LoRA SFT init (merged into the model), kept so that
    /// checkpoints can export one adapter holding SFT + RL on the original base.
    pub sft_adapter: Option<SftAdapter>,
}

/// A LoRA SFT checkpoint's adapter: its config, tensors (our names, on the CPU) and
/// the base model folder it applies to.
pub struct SftAdapter {
    pub cfg: crate::model::LoraConfig,
    pub tensors: std::collections::HashMap<String, candle_core::Tensor>,
    pub base_model: String,
}

/// The adapter folder of a LoRA checkpoint (`adapter/` or the folder itself).
fn adapter_dir(ckpt: &Path) -> Option<PathBuf> {
    [ckpt.join("adapter"), ckpt.to_path_buf()]
        .into_iter()
        .find(|d| d.join("adapter_config.json").is_file())
}

fn read_sft_adapter(ckpt: &Path) -> Result<Option<SftAdapter>> {
    let Some(dir) = adapter_dir(ckpt) else {
        return Ok(None);
    };
    let cpath = dir.join("adapter_config.json");
    let text =
        std::fs::read_to_string(&cpath).with_context(|| format!("reading {}", cpath.display()))?;
    let base_model = crate::model::peft::base_model_of(&text, &cpath)?;
    let (cfg, tensors) = crate::model::peft::import(&dir, &candle_core::Device::Cpu)?;
    Ok(Some(SftAdapter {
        cfg,
        tensors,
        base_model,
    }))
}

/// The checkpoint folder `init` names: a checkpoint folder itself, or the latest
/// checkpoint of a run folder.
pub fn resolve_init(init: &Path) -> Result<PathBuf> {
    let is_ckpt = |d: &Path| {
        d.join("config.json").is_file()
            || d.join("adapter").join("adapter_config.json").is_file()
            || d.join("adapter_config.json").is_file()
    };
    // A run folder holds config.json/tokenizer.json at its root too: prefer its
    // checkpoints.
    if init.join("checkpoints").is_dir() {
        let run = RunDir::open(init)?;
        if let Some((_, dir)) = run.latest_checkpoint()
            && is_ckpt(&dir)
        {
            return Ok(dir);
        }
    } else if is_ckpt(init) {
        return Ok(init.to_path_buf());
    }
    anyhow::bail!(
        "--init {}: neither an SFT run folder with a complete checkpoint nor a checkpoint folder (config.json or adapter/)",
        init.display()
    )
}

/// Loads the SFT policy of `cfg.init` and attaches the fresh RL adapter.
pub fn load_policy(cfg: &RlConfig) -> Result<Policy> {
    let device = parse_device(&cfg.device)?;
    let ckpt = resolve_init(&cfg.init)?;
    let p = LocalModelPolicy::from_checkpoint(&ckpt, &device)
        .with_context(|| format!("loading the SFT policy from {}", ckpt.display()))?;
    anyhow::ensure!(
        p.vl.is_none(),
        "{}: a Qwen3-VL checkpoint; RL does not train VL policies yet (its rollouts and \
         checkpoints are text-only)",
        ckpt.display()
    );
    let full_model_init = ckpt.join("config.json").is_file();
    let sft_adapter = if full_model_init {
        None
    } else {
        read_sft_adapter(&ckpt)?
    };
    let mut model = p.model;
    let n = model.add_lora(&cfg.lora, cfg.seed)?;
    anyhow::ensure!(
        n > 0,
        "field `lora.target_modules`: no module matches {:?}",
        cfg.lora.target_modules
    );
    let stop: Vec<u32> = [tokenizer::IM_END, tokenizer::END_OF_TEXT]
        .iter()
        .filter_map(|t| p.tokenizer.token_to_id(t))
        .collect();
    anyhow::ensure!(
        !stop.is_empty(),
        "the tokenizer has neither `<|im_end|>` nor `<|endoftext|>`"
    );
    Ok(Policy {
        model,
        tokenizer: p.tokenizer,
        template: p.template,
        stop,
        full_model_init,
        sft_adapter,
        init_checkpoint: ckpt,
    })
}

/// Prompt token ids (the chat template's generation prompt), keeping the last
/// `max_tokens` of a longer one.
pub fn encode_prompt(policy: &Policy, p: &RlPrompt, max_tokens: usize) -> Result<Vec<u32>> {
    let mut ids = policy
        .template
        .encode_prompt(&policy.tokenizer, &p.messages)
        .with_context(|| format!("prompt `{}`", p.id))?;
    if ids.len() > max_tokens {
        ids.drain(..ids.len() - max_tokens);
    }
    Ok(ids)
}
