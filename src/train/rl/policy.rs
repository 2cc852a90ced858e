//! The policy under RL: the SFT checkpoint's model (frozen, SFT adapter merged), its
//! tokenizer and chat template, and a fresh RL adapter.
use super::config::RlConfig;
use super::prompts::RlPrompt;
use super::seqs::Scorer;
use crate::model::vl::{Qwen3Vl, VlImageConfig};
use crate::model::{ChatTemplate, Decoder, LocalModelPolicy, parse_device, tokenizer};
use crate::train::run::RunDir;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// The model being trained, its tokenizer and stop tokens.
pub struct Policy {
    net: Net,
    /// How a Qwen3-VL policy's screenshots are preprocessed (`None`: text-only).
    pub image: Option<VlImageConfig>,
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
    /// The vocabulary's raw bytes, computed on first use.
    token_bytes: std::sync::OnceLock<Vec<Option<Vec<u8>>>>,
}

/// The network: a text decoder, or a Qwen3-VL model (whose decoder carries the RL
/// adapter; the tower stays frozen).
enum Net {
    Text(Box<Decoder>),
    Vl(Box<Qwen3Vl>),
}

impl Policy {
    /// The raw bytes of every vocabulary token
    /// ([`crate::model::constrain::token_bytes`]), computed on first use.
    pub fn token_bytes(&self) -> &[Option<Vec<u8>>] {
        self.token_bytes
            .get_or_init(|| crate::model::constrain::token_bytes(&self.tokenizer))
    }

    /// The decoder (a Qwen3-VL policy's too): its adapters are what RL trains, and
    /// it scores text-only sequences.
    pub fn model(&self) -> &Decoder {
        match &self.net {
            Net::Text(m) => m,
            Net::Vl(v) => v.text().decoder(),
        }
    }

    /// The Qwen3-VL model of a policy that sees its prompts' screenshots.
    pub fn vl(&self) -> Option<&Qwen3Vl> {
        match &self.net {
            Net::Text(_) => None,
            Net::Vl(v) => Some(v),
        }
    }

    /// What scores this policy's sequences (with their screenshots, if it sees).
    pub fn scorer(&self) -> Scorer<'_> {
        match &self.net {
            Net::Text(m) => (&**m).into(),
            Net::Vl(v) => (&**v).into(),
        }
    }
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

/// The SFT adapter of `ckpt`, its tensors under the decoder's names (a Qwen3-VL
/// adapter's `model.language_model.…` become `model.…` when `vl`).
fn read_sft_adapter(ckpt: &Path, vl: bool) -> Result<Option<SftAdapter>> {
    let Some(dir) = adapter_dir(ckpt) else {
        return Ok(None);
    };
    let cpath = dir.join("adapter_config.json");
    let text =
        std::fs::read_to_string(&cpath).with_context(|| format!("reading {}", cpath.display()))?;
    let base_model = crate::model::peft::base_model_of(&text, &cpath)?;
    let (cfg, mut tensors) = crate::model::peft::import(&dir, &candle_core::Device::Cpu)?;
    if vl {
        tensors = tensors
            .into_iter()
            .map(|(n, t)| (crate::model::vl::text::decoder_name(&n).unwrap_or(n), t))
            .collect();
    }
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
    let full_model_init = ckpt.join("config.json").is_file();
    let sft_adapter = if full_model_init {
        None
    } else {
        read_sft_adapter(&ckpt, p.vl.is_some())?
    };
    let (mut net, image) = match p.vl {
        Some(side) => (Net::Vl(Box::new(side.model)), Some(side.image)),
        None => (Net::Text(Box::new(p.model)), None),
    };
    let n = match &mut net {
        Net::Text(m) => m.add_lora(&cfg.lora, cfg.seed)?,
        Net::Vl(v) => v.add_lora(&cfg.lora, cfg.seed)?,
    };
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
        net,
        image,
        tokenizer: p.tokenizer,
        template: p.template,
        stop,
        full_model_init,
        sft_adapter,
        init_checkpoint: ckpt,
        token_bytes: std::sync::OnceLock::new(),
    })
}

/// Prompt token ids (the chat template's generation prompt), keeping the last
/// `max_tokens` of a longer one. A policy that sees gets the prompt's screenshot
/// after the last user message's text, its placeholder expanded to the image's
/// token count; a cut may not reach into the image.
pub fn encode_prompt(policy: &Policy, p: &RlPrompt, max_tokens: usize) -> Result<Vec<u32>> {
    use crate::model::vl::prompt::{expand_ids, image_tokens_of, with_screenshot};
    let seeing = policy
        .vl()
        .zip(policy.image.as_ref())
        .zip(p.screenshot.as_deref());
    let messages = match seeing {
        Some(_) => with_screenshot(&p.messages),
        None => p.messages.clone(),
    };
    let mut ids = policy
        .template
        .encode_prompt(&policy.tokenizer, &messages)
        .with_context(|| format!("prompt `{}`", p.id))?;
    if let Some(((vl, image), path)) = seeing {
        let tokens = image_tokens_of(path, image).with_context(|| format!("prompt `{}`", p.id))?;
        ids = expand_ids(&ids, vl.token_ids().image_token_id, &[tokens])
            .with_context(|| format!("prompt `{}`", p.id))?;
    }
    if ids.len() > max_tokens {
        let cut = ids.len() - max_tokens;
        if let Some(vl) = seeing.map(|((vl, _), _)| vl) {
            let t = vl.token_ids();
            anyhow::ensure!(
                !ids[..cut]
                    .iter()
                    .any(|&i| i == t.vision_start_token_id || i == t.image_token_id),
                "prompt `{}`: {} tokens with its screenshot; keeping the last {max_tokens} \
                 would cut into the image (raise max_prompt_tokens or lower the image cap)",
                p.id,
                ids.len()
            );
        }
        ids.drain(..cut);
    }
    Ok(ids)
}
