//! Qwen3-VL model folders as Hugging Face transformers reads and writes them:
//! `config.json` (`model_type: qwen3_vl`, `text_config`, `vision_config`, the image
//! token ids) and safetensors, one file or shards with `model.safetensors.index.json`,
//! under `model.visual.…`, `model.language_model.…` and `lm_head.weight`.

use super::model::Qwen3Vl;
use super::mrope::VlTokenIds;
use super::text::{VlText, VlTextConfig};
use super::vision::{VISUAL_PREFIX, VisionConfig, VisionModel};
use crate::model::weights;
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

/// A whole Qwen3-VL `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct VlConfig {
    /// The decoder and its rotary layout (`text_config`).
    pub text: VlTextConfig,
    /// The tower (`vision_config`).
    pub vision: VisionConfig,
    /// `image_token_id`, `vision_start_token_id`.
    pub ids: VlTokenIds,
    /// `vision_end_token_id` (closes an image in a prompt).
    pub vision_end_token_id: Option<u32>,
    /// `video_token_id` (kept for the round trip; videos are not handled).
    pub video_token_id: Option<u32>,
}

/// Whether a `config.json` text describes a vision-language model (it has a
/// `vision_config`), so a loader can choose between [`Qwen3Vl`] and the text model.
pub fn is_vl_config(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .is_some_and(|v| v.get("vision_config").is_some())
}

/// Whether `dir/config.json` describes a Qwen3-VL model (false when unreadable).
pub fn is_vl_folder(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("config.json")).is_ok_and(|t| is_vl_config(&t))
}

impl VlConfig {
    /// Parses a whole HF Qwen3-VL `config.json`.
    pub fn from_hf_config(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text).context("invalid JSON")?;
        if let Some(t) = v.get("model_type") {
            anyhow::ensure!(t == "qwen3_vl", "field `model_type`: {t} is not qwen3_vl");
        }
        let opt_id = |key: &str| -> Result<Option<u32>> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x
                    .as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .map(Some)
                    .ok_or_else(|| anyhow::anyhow!("field `{key}`: {x} is not a token id")),
            }
        };
        Ok(VlConfig {
            text: VlTextConfig::from_hf_config(text)?,
            vision: VisionConfig::from_hf_config(text)?,
            ids: VlTokenIds::from_hf_config(text)?,
            vision_end_token_id: opt_id("vision_end_token_id")?,
            video_token_id: opt_id("video_token_id")?,
        })
    }

    /// Reads `path` (a `config.json`), naming it in every error.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_hf_config(&text).with_context(|| format!("{}", path.display()))
    }

    /// The `config.json` transformers' `Qwen3VLConfig` reads back to this config.
    pub fn to_hf_json(&self) -> Value {
        let d = &self.text.decoder;
        let mut text = d.to_hf_json();
        if let Some(o) = text.as_object_mut() {
            for key in ["architectures", "torch_dtype", "rope_scaling", "rope_theta"] {
                o.remove(key);
            }
            o.insert("model_type".into(), json!("qwen3_vl_text"));
            let mut rope = d.rope().to_rope_parameters();
            if let Some(r) = rope.as_object_mut() {
                r.insert("mrope_section".into(), json!(self.text.mrope.section));
                r.insert(
                    "mrope_interleaved".into(),
                    json!(self.text.mrope.interleaved),
                );
            }
            o.insert("rope_parameters".into(), rope);
        }
        let mut vision = serde_json::to_value(&self.vision).unwrap_or(Value::Null);
        if let Some(o) = vision.as_object_mut() {
            o.insert("model_type".into(), json!("qwen3_vl_vision"));
        }
        json!({
            "architectures": ["Qwen3VLForConditionalGeneration"],
            "model_type": "qwen3_vl",
            "text_config": text,
            "vision_config": vision,
            "image_token_id": self.ids.image_token_id,
            "vision_start_token_id": self.ids.vision_start_token_id,
            "vision_end_token_id": self.vision_end_token_id,
            "video_token_id": self.video_token_id,
            "tie_word_embeddings": d.tie_word_embeddings,
            "dtype": "float32",
        })
    }

    /// Writes `config.json` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join("config.json");
        let text = serde_json::to_string_pretty(&self.to_hf_json())?;
        crate::util::fs::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// Weights of a decoder under the plain names (`model.…`) renamed to a Qwen3-VL
/// checkpoint's (`model.language_model.…`; `lm_head.weight` stays).
fn language_names(decoder: HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    decoder
        .into_iter()
        .map(|(n, t)| (super::text::checkpoint_name(&n), t))
        .collect()
}

impl Qwen3Vl {
    /// Builds the model from checkpoint-named weights. With `trainable` every weight
    /// (tower and decoder) is a variable, returned by name for an optimizer.
    pub fn from_config_weights(
        config: &VlConfig,
        weights: HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
        trainable: bool,
    ) -> Result<(Self, Vec<(String, Var)>)> {
        let (vision, mut vars) = if trainable {
            VisionModel::from_weights_trainable(&config.vision, &weights, dtype, device)?
        } else {
            let tower: HashMap<String, Tensor> = weights
                .iter()
                .filter(|(n, _)| n.starts_with(VISUAL_PREFIX))
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect();
            (
                VisionModel::from_weights(&config.vision, tower, dtype, device)?,
                Vec::new(),
            )
        };
        let text = VlText::from_weights(&config.text, &weights, dtype, device, trainable)?;
        vars.extend(text.decoder().trainable_vars());
        let model = Qwen3Vl::new(vision, text, config.ids)?
            .with_extra_ids(config.vision_end_token_id, config.video_token_id);
        Ok((model, vars))
    }

    /// Loads an HF Qwen3-VL folder (`config.json`, safetensors, sharded or not), frozen.
    pub fn load_dir(dir: &Path, dtype: DType, device: &Device) -> Result<Self> {
        let config = VlConfig::from_file(&dir.join("config.json"))?;
        let w = weights::load_dir(dir, device)?;
        let (model, _) = Self::from_config_weights(&config, w, dtype, device, false)
            .with_context(|| format!("loading a Qwen3-VL model from {}", dir.display()))?;
        Ok(model)
    }

    /// The whole `config.json` of this model.
    pub fn config(&self) -> VlConfig {
        VlConfig {
            text: VlTextConfig {
                decoder: self.text().decoder().config.clone(),
                mrope: self.text().layout(),
            },
            vision: self.vision().config().clone(),
            ids: self.token_ids(),
            vision_end_token_id: self.extra_ids().0,
            video_token_id: self.extra_ids().1,
        }
    }

    /// Every weight under checkpoint names (LoRA adapters left out: merge them first
    /// to export them in the weights).
    pub fn named_weights(&self) -> Result<HashMap<String, Tensor>> {
        let mut w = self.vision().named_weights()?;
        w.extend(language_names(self.text().decoder().base_weights()));
        Ok(w)
    }

    /// Writes an HF model folder transformers loads as
    /// `Qwen3VLForConditionalGeneration`: `config.json` and `model.safetensors`.
    pub fn save_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        self.config().save(dir)?;
        weights::save_file(&self.named_weights()?, &dir.join("model.safetensors"))
    }
}
