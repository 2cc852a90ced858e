//! The local model as a policy: chat messages in, the model's text out.

use super::chat_template::{ChatTemplate, Message};
use super::config::DecoderConfig;
use super::constrain::{QuoteGuard, Schema};
use super::decoder::Decoder;
use super::prefix::PromptReuse;
use super::sample::{Constraint, SampleConfig, generate_by, generate_reusing};
use super::vl::{Qwen3Vl, VlConfig, VlImageConfig};
use super::{peft, tokenizer, weights};
use anyhow::{Context, Result};
use candle_core::{DType, Device};
use std::path::Path;
use tokenizers::Tokenizer;

/// A Qwen3-VL checkpoint's whole model and its image preprocessing: the policy shows
/// it each step's screenshot.
pub struct VlSide {
    pub model: Qwen3Vl,
    pub image: VlImageConfig,
}

/// A model, its tokenizer and chat template, and decoding settings.
pub struct LocalModelPolicy {
    /// The text decoder (of a Qwen3-VL checkpoint too: the same weights, for prompts
    /// without a screenshot and for training and scoring, which are text-only).
    pub model: Decoder,
    /// Set for a Qwen3-VL checkpoint.
    pub vl: Option<Box<VlSide>>,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    pub sampling: SampleConfig,
    stop: Vec<u32>,
    /// The vocabulary's raw bytes, computed on the first constrained generation.
    token_bytes: std::sync::OnceLock<Vec<Option<Vec<u8>>>>,
    /// The last text prompt's cache: the next prompt encodes only what differs
    /// (a change to `model`'s weights must call [`Self::forget_prompt_cache`]).
    reuse: PromptReuse,
}

/// The token ids generation stops at: the ChatML end tokens the tokenizer has, the
/// config's `eos_token_id` (one id or a list) and the template's `eos_token`.
pub fn stop_tokens(config: &DecoderConfig, tok: &Tokenizer, template: &ChatTemplate) -> Vec<u32> {
    let mut stop: Vec<u32> = [tokenizer::IM_END, tokenizer::END_OF_TEXT]
        .iter()
        .filter_map(|t| tok.token_to_id(t))
        .collect();
    let from_config: Vec<u32> = match &config.eos_token_id {
        Some(serde_json::Value::Number(n)) => n.as_u64().into_iter().collect(),
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_u64()).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter_map(|id| u32::try_from(id).ok())
    .collect();
    stop.extend(from_config);
    if let Some(id) = template
        .special_tokens()
        .get("eos_token")
        .and_then(|t| tok.token_to_id(t))
    {
        stop.push(id);
    }
    stop.sort_unstable();
    stop.dedup();
    stop
}

impl LocalModelPolicy {
    /// Wraps a loaded model. Generation stops at `<|im_end|>` / `<|endoftext|>`, the
    /// config's `eos_token_id`s and the tokenizer config's `eos_token`.
    pub fn new(model: Decoder, tokenizer: Tokenizer, template: ChatTemplate) -> Self {
        let stop = stop_tokens(&model.config, &tokenizer, &template);
        LocalModelPolicy {
            model,
            vl: None,
            tokenizer,
            template,
            sampling: SampleConfig::default(),
            stop,
            token_bytes: std::sync::OnceLock::new(),
            reuse: PromptReuse::default(),
        }
    }

    /// Forgets the cached keys and values of the last prompt; needed only after
    /// changing the model's weights in place.
    pub fn forget_prompt_cache(&self) {
        self.reuse.clear();
    }

    /// Loads an HF model folder (`config.json`, safetensors, `tokenizer.json`,
    /// optional `tokenizer_config.json`), with an optional PEFT adapter merged in.
    pub fn load(model_dir: &Path, adapter: Option<&Path>, device: &Device) -> Result<Self> {
        Self::load_with_images(model_dir, adapter, None, device)
    }

    /// [`Self::load`]; a Qwen3-VL model preprocesses screenshots with `images` when
    /// given (a LoRA checkpoint's setting) instead of the folder's own.
    fn load_with_images(
        model_dir: &Path,
        adapter: Option<&Path>,
        images: Option<VlImageConfig>,
        device: &Device,
    ) -> Result<Self> {
        let dtype = if device.is_cpu() {
            DType::F32
        } else {
            DType::BF16
        };
        if super::vl::is_vl_folder(model_dir) {
            return Self::load_vl(model_dir, adapter, images, dtype, device);
        }
        let config = DecoderConfig::from_file(model_dir.join("config.json"))?;
        let w = weights::load_dir(model_dir, device)?;
        let mut model = Decoder::from_weights(&config, w, dtype, device, false)
            .with_context(|| format!("loading model from {}", model_dir.display()))?;
        if let Some(dir) = adapter {
            peft::attach(&mut model, dir, device)?;
            model.merge_lora()?;
        }
        let tok = tokenizer::load(model_dir.join("tokenizer.json"))?;
        let template = ChatTemplate::for_model_dir(model_dir)?;
        Ok(Self::new(model, tok, template))
    }

    /// Loads a Qwen3-VL folder: the whole model (with the PEFT `adapter` merged into
    /// its decoder), the decoder over the same tensors, and `images` or else the
    /// folder's `preprocessor_config.json` (Qwen3-VL's settings when absent).
    fn load_vl(
        dir: &Path,
        adapter: Option<&Path>,
        images: Option<VlImageConfig>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let config = VlConfig::from_file(&dir.join("config.json"))?;
        let w = weights::load_dir(dir, device)?;
        let (mut model, _) = Qwen3Vl::from_config_weights(&config, w, dtype, device, false)
            .with_context(|| format!("loading the Qwen3-VL model in {}", dir.display()))?;
        if let Some(a) = adapter {
            model.attach_adapter(a, device)?;
            model.merge_lora()?;
        }
        let decoder = model.text().decoder();
        let text = Decoder::from_weights(
            &decoder.config,
            decoder.base_weights(),
            dtype,
            device,
            false,
        )
        .with_context(|| format!("loading the decoder of {}", dir.display()))?;
        let image = match images {
            Some(i) => i,
            None => VlImageConfig::of_model_dir(dir)?.unwrap_or_else(VlImageConfig::qwen3_vl),
        };
        let tok = tokenizer::load(dir.join("tokenizer.json"))?;
        let template = ChatTemplate::for_model_dir(dir)?;
        let mut p = Self::new(text, tok, template);
        p.vl = Some(Box::new(VlSide { model, image }));
        Ok(p)
    }

    /// Loads a training checkpoint folder: a full model folder, or a PEFT adapter
    /// whose `base_model_name_or_path` names the base model folder (on a Qwen3-VL
    /// base, the checkpoint's `preprocessor_config.json` wins over the base's).
    pub fn from_checkpoint(dir: &Path, device: &Device) -> Result<Self> {
        if dir.join("config.json").exists() {
            return Self::load(dir, None, device);
        }
        let adapter = dir.join("adapter");
        let adapter = if adapter.join("adapter_config.json").exists() {
            adapter
        } else {
            dir.to_path_buf()
        };
        let cpath = adapter.join("adapter_config.json");
        let text = std::fs::read_to_string(&cpath)
            .with_context(|| format!("{}: neither a model nor an adapter", dir.display()))?;
        let base = super::peft::base_model_of(&text, &cpath)?;
        let images = VlImageConfig::of_model_dir(dir)?;
        Self::load_with_images(Path::new(&base), Some(&adapter), images, device)
    }

    /// The token ids generation stops at (see [`stop_tokens`]).
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop
    }

    /// Generates the assistant reply to `messages` (greedy when temperature is 0).
    pub fn generate(&self, messages: &[Message]) -> Result<String> {
        self.generate_as(messages, None, None)
    }

    /// [`Self::generate`] or [`Self::generate_constrained`] (with `constrained`) for a
    /// model that sees: a Qwen3-VL checkpoint gets `screenshot` after the last user
    /// message's text; a text model ignores it.
    pub fn generate_seeing(
        &self,
        messages: &[Message],
        screenshot: Option<&Path>,
        constrained: Option<(&std::sync::Arc<Schema>, Option<&QuoteGuard>)>,
    ) -> Result<String> {
        self.generate_as(messages, constrained, screenshot)
    }

    /// Generates a reply that is a JSON value `schema` accepts, closed the shortest way
    /// before `max_new_tokens` runs out (a prefix of one only when even that does not
    /// fit), its quoted spans held by `quotes` if given.
    pub fn generate_constrained(
        &self,
        messages: &[Message],
        schema: &std::sync::Arc<Schema>,
        quotes: Option<&QuoteGuard>,
    ) -> Result<String> {
        self.generate_as(messages, Some((schema, quotes)), None)
    }

    fn generate_as(
        &self,
        messages: &[Message],
        constrained: Option<(&std::sync::Arc<Schema>, Option<&QuoteGuard>)>,
        screenshot: Option<&Path>,
    ) -> Result<String> {
        let seeing = self.vl.as_deref().zip(screenshot);
        let shown;
        let messages = match seeing {
            Some(_) => {
                shown = super::vl::prompt::with_screenshot(messages);
                &shown[..]
            }
            None => messages,
        };
        let prompt = self.template.encode_prompt(&self.tokenizer, messages)?;
        let constraint = constrained.map(|(s, quotes)| Constraint {
            matcher: s.matcher(),
            quotes: quotes.cloned(),
            token_bytes: self
                .token_bytes
                .get_or_init(|| super::constrain::token_bytes(&self.tokenizer)),
        });
        let ids = match seeing {
            None => generate_reusing(
                &self.model,
                &prompt,
                &self.stop,
                &self.sampling,
                constraint,
                Some(&self.reuse),
            )?,
            Some((vl, path)) => {
                let shot =
                    super::vl::prompt::Screenshot::load(path, &vl.image, self.model.device())?;
                let image_token = vl.model.token_ids().image_token_id;
                let prompt = super::vl::prompt::expand_ids(&prompt, image_token, &[shot.tokens])?;
                let mut cache = super::vl::VlCache::for_decoding();
                let mut first = true;
                let step = |tokens: &[u32]| -> Result<candle_core::Tensor> {
                    let images = first.then(|| shot.images());
                    first = false;
                    Ok(vl.model.forward(tokens, images, Some(&mut cache))?)
                };
                let max_pos = self.model.config.max_position_embeddings;
                generate_by(
                    step,
                    max_pos,
                    &prompt,
                    &self.stop,
                    &self.sampling,
                    constraint,
                )?
            }
        };
        self.tokenizer
            .decode(&ids, true)
            .map_err(|e| anyhow::anyhow!("decoding: {e}"))
    }
}
