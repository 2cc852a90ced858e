//! The model an SFT run trains: the text decoder ([`Decoder`]) or a Qwen3-VL model that
//! also sees each sample's screenshot ([`Qwen3Vl`]: the `tiny-vl` preset from scratch,
//! or LoRA on an HF Qwen3-VL folder, the `qwen3-vl-lora` preset).

use super::nll::{BatchNll, LossRows, micro_batch_nll};
use super::sft_config::TinyVision;
use crate::model::chat_template::ChatTemplate;
use crate::model::chat_template::Encoded;
use crate::model::vl::prompt::{self as vl_prompt, Screenshot};
use crate::model::vl::{Qwen3Vl, VISUAL_PREFIX, VlConfig, VlImageConfig};
use crate::model::{Decoder, DecoderConfig, tokenizer, weights};
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// A Qwen3-VL model in training, the variables of its tower, and how its screenshots
/// are preprocessed.
pub struct VlTrainee {
    pub model: Qwen3Vl,
    /// The tower's variables by checkpoint name (the decoder's are its own).
    pub vision_vars: Vec<(String, Var)>,
    pub image: VlImageConfig,
}

impl VlTrainee {
    /// An HF Qwen3-VL folder to train adapters on: tower and decoder frozen (LoRA goes
    /// on the decoder, as in the paper), its tokenizer and chat template, screenshots
    /// preprocessed as its `preprocessor_config.json` says (Qwen3-VL's settings when
    /// absent), resized to at most `max_pixels` when given.
    pub fn load_hf(
        dir: &Path,
        max_pixels: Option<usize>,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tokenizer, ChatTemplate, Self)> {
        let config = VlConfig::from_file(&dir.join("config.json"))?;
        let w = weights::load_dir(dir, device)?;
        let (model, _) = Qwen3Vl::from_config_weights(&config, w, dtype, device, false)
            .with_context(|| format!("loading the Qwen3-VL model in {}", dir.display()))?;
        let tok = tokenizer::load(dir.join("tokenizer.json"))?;
        let ids = crate::model::vl::prompt::token_ids(&tok)
            .with_context(|| format!("{}: tokenizer.json", dir.display()))?;
        anyhow::ensure!(
            ids.image_token_id == config.ids.image_token_id,
            "{}: config.json field `image_token_id` is {}, but the tokenizer's `{}` is {}",
            dir.display(),
            config.ids.image_token_id,
            crate::model::vl::prompt::IMAGE_PAD,
            ids.image_token_id
        );
        let template = ChatTemplate::for_model_dir(dir)?;
        let mut image = VlImageConfig::of_model_dir(dir)?.unwrap_or_else(VlImageConfig::qwen3_vl);
        if let Some(cap) = max_pixels {
            image.max_pixels = cap;
            image.min_pixels = image.min_pixels.min(cap);
        }
        image
            .validate()
            .with_context(|| format!("field `max_pixels` ({max_pixels:?})"))?;
        let trainee = VlTrainee {
            model,
            vision_vars: Vec::new(),
            image,
        };
        Ok((tok, template, trainee))
    }
}

/// The model of an SFT run.
pub enum SftModel {
    Text(Box<Decoder>),
    Vl(Box<VlTrainee>),
}

impl SftModel {
    /// The text decoder (dtype, device, dropout key, configuration).
    pub fn decoder(&self) -> &Decoder {
        match self {
            SftModel::Text(m) => m,
            SftModel::Vl(v) => v.model.text().decoder(),
        }
    }

    /// The text decoder, mutably (LoRA).
    pub fn decoder_mut(&mut self) -> &mut Decoder {
        match self {
            SftModel::Text(m) => m,
            SftModel::Vl(v) => v.model.text_mut().decoder_mut(),
        }
    }

    /// Every trainable variable by name: the tower's (VL) and the decoder's.
    pub fn trainable_vars(&self) -> Vec<(String, Var)> {
        let mut vars = match self {
            SftModel::Text(_) => Vec::new(),
            SftModel::Vl(v) => v.vision_vars.clone(),
        };
        vars.extend(self.decoder().trainable_vars());
        vars
    }

    /// Parameters in the model (tower included).
    pub fn num_params(&self) -> usize {
        let tower: usize = match self {
            SftModel::Text(_) => 0,
            SftModel::Vl(v) => v.vision_vars.iter().map(|(_, x)| x.elem_count()).sum(),
        };
        tower + self.decoder().config.num_params()
    }

    /// Sets trainable values by name (a checkpoint's `trainable.safetensors`).
    pub fn load_params(&mut self, values: &HashMap<String, Tensor>) -> Result<()> {
        let (tower, rest): (HashMap<_, _>, HashMap<_, _>) = values
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .partition(|(n, _)| n.starts_with(VISUAL_PREFIX));
        if let SftModel::Vl(v) = self {
            let vars: HashMap<&str, &Var> =
                v.vision_vars.iter().map(|(n, x)| (n.as_str(), x)).collect();
            for (name, t) in &tower {
                let var = vars
                    .get(name.as_str())
                    .with_context(|| format!("checkpoint has unknown parameter `{name}`"))?;
                anyhow::ensure!(
                    var.dims() == t.dims(),
                    "parameter `{name}`: checkpoint shape {:?}, model shape {:?}",
                    t.dims(),
                    var.dims()
                );
                var.set(&t.to_dtype(var.dtype())?.to_device(var.device())?)?;
            }
        } else if let Some(name) = tower.keys().next() {
            anyhow::bail!("checkpoint has unknown parameter `{name}` (a vision tower)");
        }
        self.decoder_mut().load_params(&rest)
    }

    /// Writes the whole model as a loadable HF folder (`config.json`, safetensors).
    pub fn save_model(&self, dir: &Path) -> Result<()> {
        match self {
            SftModel::Text(m) => {
                m.config.save(dir)?;
                weights::save_file(&m.base_weights(), &dir.join("model.safetensors"))
            }
            SftModel::Vl(v) => v.model.save_dir(dir),
        }
    }

    /// Loss terms of a micro-batch whose sample `k` shows `images[k]` (VL: each
    /// sample is its own forward pass, with its screenshot).
    pub fn nll(
        &self,
        batch: &[&Encoded],
        images: &[Option<PathBuf>],
        pad: u32,
        prompt_weight: f64,
    ) -> Result<BatchNll> {
        let v = match self {
            SftModel::Text(m) => return micro_batch_nll(m, batch, pad, prompt_weight),
            SftModel::Vl(v) => v,
        };
        let mut total: Option<BatchNll> = None;
        for (e, image) in batch.iter().zip(images) {
            let rows = LossRows::of(&[e], pad, prompt_weight)?;
            let dev = v.model.text().decoder().device();
            let shot = image
                .as_deref()
                .map(|path| Screenshot::load(path, &v.image, dev))
                .transpose()?;
            let images = shot.as_ref().map(Screenshot::images);
            let hidden = v.model.forward_hidden(&rows.inputs, images, None)?;
            let nll = rows.nll(&hidden, prompt_weight, |h| Ok(v.model.text().logits(h)?))?;
            total = Some(match total {
                None => nll,
                Some(t) => t.combined(nll)?,
            });
        }
        total.context("empty micro-batch")
    }
}

/// A `tiny-vl` model at random init: the tiny decoder `text` with M-RoPE and the
/// tower `v`, every weight trainable.
pub(super) fn tiny_vl(
    text: &DecoderConfig,
    v: &TinyVision,
    tok: &tokenizers::Tokenizer,
    seed: u64,
    dtype: DType,
    device: &Device,
) -> Result<VlTrainee> {
    use crate::model::vl::{
        MropeLayout, VisionConfig, VisionModel, VlConfig, VlText, VlTextConfig,
    };
    let config = VlConfig {
        text: VlTextConfig {
            decoder: text.clone(),
            mrope: MropeLayout::interleaved(v.mrope_section),
        },
        vision: VisionConfig {
            depth: v.depth,
            hidden_size: v.hidden_size,
            intermediate_size: v.intermediate_size,
            num_heads: v.num_heads,
            patch_size: v.patch_size,
            temporal_patch_size: 2,
            spatial_merge_size: v.spatial_merge_size,
            in_channels: 3,
            out_hidden_size: text.hidden_size,
            num_position_embeddings: v.num_position_embeddings,
            deepstack_visual_indexes: v.deepstack_visual_indexes.clone(),
            hidden_act: "gelu_pytorch_tanh".into(),
        },
        ids: vl_prompt::token_ids(tok)?,
        vision_end_token_id: tok.token_to_id(vl_prompt::VISION_END),
        video_token_id: None,
    };
    config.vision.validate()?;
    let mut w = VlText::random_weights(&config.text, seed)?;
    w.extend(VisionModel::random_weights(&config.vision, seed ^ 0x5EED)?);
    let (model, vars) = Qwen3Vl::from_config_weights(&config, w, dtype, device, true)?;
    let vision_vars = vars
        .into_iter()
        .filter(|(n, _)| n.starts_with(crate::model::vl::VISUAL_PREFIX))
        .collect();
    Ok(VlTrainee {
        model,
        vision_vars,
        image: v.image_config(),
    })
}
