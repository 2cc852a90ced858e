//! Preparing an SFT run: the model (fresh tiny, or a base with LoRA), the samples
//! encoded and fitted to the context, the images of a vision model, the dtype, and
//! the value-renaming augmenter.

use super::run::RunDir;
use super::samples;
use super::sft_config::{SftConfig, TinyModel};
use super::sft_model::{SftModel, VlTrainee, tiny_vl};
use crate::model::chat_template::{ChatTemplate, Encoded};
use crate::model::vl::prompt::{self as vl_prompt, expand_images};
use crate::model::{Decoder, DecoderConfig, tokenizer, weights};
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use candle_core::{DType, Device};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

pub(super) struct Prepared {
    pub(super) model: SftModel,
    pub(super) samples: Vec<Encoded>,
    /// The screenshot each sample shows (VL models; `None` for text models).
    pub(super) images: Vec<Option<PathBuf>>,
    pub(super) pad: u32,
    /// What value renaming needs: the chats behind `samples` (same order), their
    /// value statistics, and the tokenizer and template that encode them.
    pub(super) augment: Augmenter,
    /// The prompt layout version every sample records, written into each checkpoint.
    pub(super) prompt_format: Option<String>,
}

/// Draws a sample with its values renamed ([`super::augment`]).
pub(super) struct Augmenter {
    chats: Vec<Vec<crate::model::Message>>,
    /// Which of its chat's sequences ([`ChatTemplate::encode_turns`]) each sample is.
    turns: Vec<usize>,
    values: super::augment::ValueWords,
    tok: tokenizers::Tokenizer,
    template: ChatTemplate,
    context: usize,
    /// VL: the image placeholder token and each sample's image token counts.
    images: Option<(u32, Vec<Vec<usize>>)>,
}

impl Augmenter {
    /// Stream item `g`'s sample `i`: renamed with probability `p` (seeded by the run's
    /// seed and `g`, so a resumed run draws the same), else `samples[i]` itself.
    pub(super) fn draw<'a>(
        &self,
        samples: &'a [Encoded],
        i: usize,
        g: usize,
        p: f64,
        seed: u64,
    ) -> Result<std::borrow::Cow<'a, Encoded>> {
        use rand::Rng;
        let keep = std::borrow::Cow::Borrowed(&samples[i]);
        if p <= 0.0 {
            return Ok(keep);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(
            seed ^ 0xA5A5_0000_0000 ^ (g as u64).wrapping_mul(0x2545_F491_4F6C_DD1D),
        );
        if !rng.random_bool(p) {
            return Ok(keep);
        }
        let Some(chat) = self.values.rename(&self.chats[i], &mut rng) else {
            return Ok(keep);
        };
        let seq = self
            .template
            .encode_turns(&self.tok, &chat)?
            .into_iter()
            .nth(self.turns[i]);
        let seq = match (seq, &self.images) {
            (Some(e), Some((token, counts))) => Some(expand_images(&e, *token, &counts[i])?),
            (seq, _) => seq,
        };
        let fitted = seq.and_then(|e| fit_context(e, self.context).0);
        let whole = |e: &Encoded| match &self.images {
            Some((token, counts)) => whole_images(e, *token, &counts[i]),
            None => true,
        };
        match fitted.filter(whole) {
            Some(e) => Ok(std::borrow::Cow::Owned(e)),
            None => Ok(keep),
        }
    }
}

/// Whether every image of `e` kept all its `counts` placeholder tokens (left
/// truncation may cut into an image, which the tower cannot then fill).
pub(super) fn whole_images(e: &Encoded, image_token: u32, counts: &[usize]) -> bool {
    e.ids.iter().filter(|&&t| t == image_token).count() == counts.iter().sum::<usize>()
}

/// `e` left-truncated to `context` tokens; `None` when no assistant token is left to
/// train on. The bool says whether it was truncated.
pub(super) fn fit_context(mut e: Encoded, context: usize) -> (Option<Encoded>, bool) {
    let truncated = e.ids.len() > context;
    if truncated {
        let cut = e.ids.len() - context;
        e.ids.drain(..cut);
        e.mask.drain(..cut);
    }
    // The first token is never a target.
    (e.mask.iter().skip(1).any(|&m| m).then_some(e), truncated)
}

pub(super) fn resolve_dtype(cfg: &SftConfig, device: &Device) -> Result<DType> {
    compute_dtype(&cfg.dtype, cfg.lora.is_some(), !device.is_cpu())
}

/// The model's compute dtype for a run's `dtype` setting.
///
/// `auto` is bf16 on a GPU when the base weights are frozen (LoRA: the frozen base is
/// stored and multiplied in bf16, the adapters stay f32 and the loss is taken in f32),
/// and f32 otherwise: on the CPU (no fast bf16 there), and for full training (the
/// `tiny` preset), where bf16 weights would round away AdamW's small updates.
/// `--set dtype=bf16` forces bf16 anyway.
pub fn compute_dtype(dtype: &str, lora: bool, on_gpu: bool) -> Result<DType> {
    Ok(match dtype {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "auto" if lora && on_gpu => DType::BF16,
        "auto" => DType::F32,
        other => anyhow::bail!("dtype `{other}`: use auto, f32 or bf16"),
    })
}

/// Builds tokenizer, samples and model, writing the tokenizer/config of a tiny model
/// into the run folder (and reusing them on resume).
pub(super) fn prepare(cfg: &SftConfig, run: &RunDir, device: &Device) -> Result<Prepared> {
    let ds = Dataset::open(&cfg.dataset)
        .with_context(|| format!("opening dataset {}", cfg.dataset.display()))?;
    // A VL model (tiny-vl, or LoRA on a Qwen3-VL folder) sees each step's screenshot.
    let vl_base = cfg.tiny.is_none()
        && cfg
            .model
            .as_deref()
            .is_some_and(crate::model::vl::is_vl_folder);
    let sees = cfg.vision.is_some() || vl_base;
    let Chats {
        chats,
        shots,
        prompt_format,
    } = read_chats(&ds, sees)?;
    anyhow::ensure!(
        !chats.is_empty(),
        "{}: no successful trajectory steps to train on",
        cfg.dataset.display()
    );
    let dtype = resolve_dtype(cfg, device)?;
    let (tok, template, mut model) = load_model(cfg, run, &chats, vl_base, dtype, device)?;
    if let Some(l) = &cfg.lora {
        let n = model.decoder_mut().add_lora(l, cfg.seed)?;
        anyhow::ensure!(
            n > 0,
            "no module matches lora.target_modules {:?}",
            l.target_modules
        );
    }
    let pad = tok
        .token_to_id(tokenizer::END_OF_TEXT)
        .or_else(|| tok.token_to_id(tokenizer::IM_END))
        .unwrap_or(0);
    // VL: the placeholder token and each chat's image token counts.
    let image_counts = image_counts(&model, &shots)?;
    let kept = encode_samples(cfg, &tok, &template, &chats, &shots, image_counts.as_ref())?;
    run.log(&format!(
        "{} samples ({} left-truncated to {} tokens, {} without assistant tokens or whole images dropped, {} with a screenshot); {} parameters, {} trainable",
        kept.samples.len(),
        kept.truncated,
        cfg.context,
        kept.sequences - kept.samples.len(),
        kept.shots.iter().filter(|s| s.is_some()).count(),
        model.num_params(),
        model.trainable_vars().iter().map(|(_, v)| v.elem_count()).sum::<usize>()
    ))?;
    anyhow::ensure!(
        !kept.samples.is_empty(),
        "no sample has assistant tokens to train on"
    );
    let values = super::augment::ValueWords::from_chats(&kept.chats);
    let images = image_counts.map(|(token, _)| (token, kept.counts));
    Ok(Prepared {
        model,
        samples: kept.samples,
        images: kept.shots,
        pad,
        augment: Augmenter {
            chats: kept.chats,
            turns: kept.turns,
            values,
            tok,
            template,
            context: cfg.context,
            images,
        },
        prompt_format,
    })
}

/// The model to train, with its tokenizer and chat template: a tiny one from scratch,
/// a Qwen3-VL folder, or a text model's folder.
fn load_model(
    cfg: &SftConfig,
    run: &RunDir,
    chats: &[Chat],
    vl_base: bool,
    dtype: DType,
    device: &Device,
) -> Result<(tokenizers::Tokenizer, ChatTemplate, SftModel)> {
    Ok(match (&cfg.tiny, &cfg.model) {
        (Some(tiny), _) => build_tiny(cfg, tiny, run, chats, dtype, device)?,
        (None, Some(dir)) if vl_base => {
            let (tok, template, trainee) = VlTrainee::load_hf(dir, cfg.max_pixels, dtype, device)?;
            (tok, template, SftModel::Vl(Box::new(trainee)))
        }
        (None, Some(dir)) => {
            let config = DecoderConfig::from_file(dir.join("config.json"))?;
            let w = weights::load_dir(dir, device)?;
            let model = Decoder::from_weights(&config, w, dtype, device, cfg.lora.is_none())?;
            let tok = tokenizer::load(dir.join("tokenizer.json"))?;
            let template = ChatTemplate::for_model_dir(dir)?;
            (tok, template, SftModel::Text(Box::new(model)))
        }
        (None, None) => anyhow::bail!("config has neither `tiny` nor `model`"),
    })
}

/// A VL model's image placeholder token and each chat's image token counts (one
/// screenshot at most a chat); `None` for a text model.
fn image_counts(
    model: &SftModel,
    shots: &[Option<PathBuf>],
) -> Result<Option<(u32, Vec<Vec<usize>>)>> {
    Ok(match model {
        SftModel::Vl(v) => {
            let counts = shots
                .iter()
                .map(|s| match s {
                    Some(p) => Ok(vec![vl_prompt::image_tokens_of(p, &v.image)?]),
                    None => Ok(Vec::new()),
                })
                .collect::<Result<Vec<_>>>()?;
            Some((v.model.token_ids().image_token_id, counts))
        }
        SftModel::Text(_) => None,
    })
}

/// A chat as the template encodes it.
type Chat = Vec<crate::model::Message>;

/// The chats to train on, the screenshot each shows, and the prompt layout they
/// record.
struct Chats {
    chats: Vec<Chat>,
    shots: Vec<Option<PathBuf>>,
    prompt_format: Option<String>,
}

/// The dataset's current samples as chats, each with its screenshot when the model
/// sees (`sees`), and the prompt layout they record (for checkpoints).
fn read_chats(ds: &Dataset, sees: bool) -> Result<Chats> {
    let mut chats = Vec::new();
    let mut shots = Vec::new();
    // Read once: the chats, and the layout their prompts record (for checkpoints).
    let current = crate::curate::current_samples(ds)?;
    let prompt_format = super::prompt_record::of_samples(&current);
    for (chat, image) in samples::with_screenshots_of(ds, current)? {
        match (sees, image) {
            (true, Some(path)) => {
                chats.push(vl_prompt::with_screenshot(&chat));
                shots.push(Some(path));
            }
            (_, _) => {
                chats.push(chat);
                shots.push(None);
            }
        }
    }
    Ok(Chats {
        chats,
        shots,
        prompt_format,
    })
}

/// A tiny model from scratch: its BPE trained on the chats (or the run folder's, on
/// resume), its config, random weights, and a vision tower for `tiny-vl`. The
/// tokenizer, its config and the model config are written into the run folder.
fn build_tiny(
    cfg: &SftConfig,
    tiny: &TinyModel,
    run: &RunDir,
    chats: &[Vec<crate::model::Message>],
    dtype: DType,
    device: &Device,
) -> Result<(tokenizers::Tokenizer, ChatTemplate, SftModel)> {
    let tok_path = run.root().join("tokenizer.json");
    let template = ChatTemplate::chatml();
    let tok = if tok_path.exists() {
        tokenizer::load(&tok_path)?
    } else {
        let texts: Vec<String> = chats
            .iter()
            .map(|c| template.render(c, false))
            .collect::<Result<_>>()?;
        let mut tok = tokenizer::train_bpe(texts.iter(), tiny.vocab_size, tiny.bpe_min_frequency)?;
        if cfg.vision.is_some() {
            tokenizer::add_vision_tokens(&mut tok);
        }
        tokenizer::save(&tok, run.root())?;
        tok
    };
    let config = DecoderConfig {
        arch: crate::model::arch::Arch::qwen3(),
        vocab_size: tok.get_vocab_size(true),
        hidden_size: tiny.hidden_size,
        intermediate_size: tiny.intermediate_size,
        num_hidden_layers: tiny.num_hidden_layers,
        num_attention_heads: tiny.num_attention_heads,
        num_key_value_heads: Some(tiny.num_key_value_heads),
        head_dim: Some(tiny.head_dim),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: true,
        max_position_embeddings: cfg.context.max(2048),
        eos_token_id: tok.token_to_id(tokenizer::IM_END).map(Into::into),
    };
    tokenizer::save_tokenizer_config(
        &tok,
        template.source(),
        config.max_position_embeddings,
        run.root(),
    )?;
    let model = match &cfg.vision {
        None => {
            config.save(run.root())?;
            let w = Decoder::random_weights(&config, cfg.seed)?;
            SftModel::Text(Box::new(Decoder::from_weights(
                &config, w, dtype, device, true,
            )?))
        }
        Some(v) => {
            let trainee = tiny_vl(&config, v, &tok, cfg.seed, dtype, device)?;
            trainee.model.config().save(run.root())?;
            trainee.image.save(run.root())?;
            SftModel::Vl(Box::new(trainee))
        }
    };
    Ok((tok, template, model))
}

/// The encoded samples kept for training, each with its chat, which of the chat's
/// sequences it is, its screenshot and (VL) its image token counts.
struct Kept {
    samples: Vec<Encoded>,
    chats: Vec<Vec<crate::model::Message>>,
    turns: Vec<usize>,
    shots: Vec<Option<PathBuf>>,
    counts: Vec<Vec<usize>>,
    /// Samples cut at the front to fit the context.
    truncated: usize,
    /// Sequences encoded, kept or not.
    sequences: usize,
}

/// Encodes every chat's sequences ([`ChatTemplate::encode_turns`]), expands their
/// images (VL), fits each to the context and keeps those that still have assistant
/// tokens and whole images.
fn encode_samples(
    cfg: &SftConfig,
    tok: &tokenizers::Tokenizer,
    template: &ChatTemplate,
    chats: &[Vec<crate::model::Message>],
    shots: &[Option<PathBuf>],
    image_counts: Option<&(u32, Vec<Vec<usize>>)>,
) -> Result<Kept> {
    let mut kept = Kept {
        samples: Vec::new(),
        chats: Vec::new(),
        turns: Vec::new(),
        shots: Vec::new(),
        counts: Vec::new(),
        truncated: 0,
        sequences: 0,
    };
    for (ci, c) in chats.iter().enumerate() {
        for (turn, e) in template.encode_turns(tok, c)?.into_iter().enumerate() {
            kept.sequences += 1;
            let e = match image_counts {
                Some((token, counts)) => expand_images(&e, *token, &counts[ci])?,
                None => e,
            };
            let (e, cut) = fit_context(e, cfg.context);
            kept.truncated += usize::from(cut);
            let e = e.filter(|e| match image_counts {
                Some((token, counts)) => whole_images(e, *token, &counts[ci]),
                None => true,
            });
            if let Some(e) = e {
                kept.samples.push(e);
                kept.chats.push(c.clone());
                kept.turns.push(turn);
                kept.shots.push(shots[ci].clone());
                if let Some((_, counts)) = image_counts {
                    kept.counts.push(counts[ci].clone());
                }
            }
        }
    }
    Ok(kept)
}
