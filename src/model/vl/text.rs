//! The Qwen3-VL text decoder: [`Decoder`]'s blocks (q/k norm, grouped-query attention,
//! SwiGLU) with multimodal rotary positions ([`super::mrope`]) and DeepStack features
//! added to the image positions' hidden states after the first layers
//! (transformers' `Qwen3VLTextModel._deepstack_process`).
//!
//! The weights are named as in a Qwen3-VL checkpoint (`model.language_model.…`,
//! `lm_head.weight`); [`VlText::decoder`] is the plain [`Decoder`] over them (LoRA,
//! parameters, checkpoints under `model.…` names).

use super::mrope::{MropeLayout, MropePositions};
use crate::model::fused::RopeTables;
use crate::model::{Decoder, DecoderConfig, KvCache};
use candle_core::{DType, Device, Result, Tensor};
use std::collections::HashMap;

/// Where the text decoder's weights live in a Qwen3-VL checkpoint (the LM head is
/// `lm_head.weight` at the top).
pub const LANGUAGE_PREFIX: &str = "model.language_model";

/// The `text_config` of a Qwen3-VL model: a Qwen3 decoder and its rotary layout.
#[derive(Debug, Clone, PartialEq)]
pub struct VlTextConfig {
    /// Sizes, norms, rotary base (the decoder's `config`).
    pub decoder: DecoderConfig,
    /// How the rotary frequencies split over (temporal, height, width).
    pub mrope: MropeLayout,
}

impl VlTextConfig {
    /// The `text_config` of a whole HF Qwen3-VL `config.json` (a top-level
    /// `tie_word_embeddings` applies when `text_config` has none). The rotary dictionary
    /// (`rope_scaling` or `rope_parameters`) must name `mrope_section`; the layout is
    /// interleaved, as transformers' Qwen3-VL computes it whatever `mrope_interleaved`
    /// says. Everything else is read (and refused) as [`DecoderConfig::from_hf_json`].
    pub fn from_hf_config(text: &str) -> anyhow::Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let mut tc = v
            .get("text_config")
            .and_then(|t| t.as_object())
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("config has no `text_config` object"))?;
        if let Some(t) = tc.remove("model_type") {
            anyhow::ensure!(
                t == "qwen3_vl_text",
                "field `text_config.model_type`: {t} is not qwen3_vl_text"
            );
        }
        if !tc.contains_key("tie_word_embeddings")
            && let Some(t) = v.get("tie_word_embeddings")
        {
            tc.insert("tie_word_embeddings".into(), t.clone());
        }
        let mut section: Option<[usize; 3]> = None;
        for key in ["rope_scaling", "rope_parameters"] {
            let Some(d) = tc.get_mut(key).and_then(|d| d.as_object_mut()) else {
                continue;
            };
            d.remove("mrope_interleaved");
            if let Some(s) = d.remove("mrope_section") {
                let s: [usize; 3] = serde_json::from_value(s.clone()).map_err(|_| {
                    anyhow::anyhow!(
                        "field `text_config.{key}.mrope_section`: expected 3 counts, got {s}"
                    )
                })?;
                anyhow::ensure!(
                    section.is_none_or(|x| x == s),
                    "`rope_scaling` and `rope_parameters` name different mrope_section"
                );
                section = Some(s);
            }
        }
        let section = section
            .ok_or_else(|| anyhow::anyhow!("`text_config` names no rope_scaling.mrope_section"))?;
        let decoder = DecoderConfig::from_hf_json(&serde_json::Value::Object(tc))
            .map_err(|e| anyhow::anyhow!("`text_config`: {e:#}"))?;
        decoder.validate()?;
        let cfg = VlTextConfig {
            mrope: MropeLayout::interleaved(section),
            decoder,
        };
        cfg.mrope.axes(cfg.decoder.head_dim() / 2)?;
        Ok(cfg)
    }
}

/// DeepStack features of the image tokens of one forward pass.
#[derive(Debug, Clone)]
pub struct Deepstack {
    /// Flattened `batch · seq` indices of the image tokens, in feature-row order.
    pub positions: Vec<u32>,
    /// One `(positions.len(), hidden)` tensor per layer, added after layers 0, 1, …
    pub features: Vec<Tensor>,
}

/// The Qwen3-VL text decoder with its LM head.
pub struct VlText {
    layout: MropeLayout,
    decoder: Decoder,
    inv_freq: Vec<f32>,
    attention_factor: f64,
}

/// The plain decoder's name (`model.…`) of a Qwen3-VL text weight, `None` for the
/// weights of other parts (the vision tower).
pub fn decoder_name(vl_name: &str) -> Option<String> {
    if vl_name == "lm_head.weight" {
        return Some(vl_name.to_string());
    }
    vl_name
        .strip_prefix(LANGUAGE_PREFIX)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|rest| format!("model.{rest}"))
}

/// A Qwen3-VL checkpoint's name of a plain decoder name (`model.…` becomes
/// `model.language_model.…`; `lm_head…` stays): the inverse of [`decoder_name`].
pub fn checkpoint_name(decoder_name: &str) -> String {
    match decoder_name.strip_prefix("model.") {
        Some(rest) => format!("{LANGUAGE_PREFIX}.{rest}"),
        None => decoder_name.to_string(),
    }
}

impl VlText {
    /// Builds the decoder from checkpoint-named weights (other parts' weights are
    /// ignored); `trainable` as [`Decoder::from_weights`].
    pub fn from_weights(
        config: &VlTextConfig,
        weights: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
        trainable: bool,
    ) -> anyhow::Result<Self> {
        let cfg = &config.decoder;
        let half = cfg.head_dim() / 2;
        config.mrope.axes(half)?;
        let renamed = weights
            .iter()
            .filter_map(|(n, t)| decoder_name(n).map(|n| (n, t.clone())))
            .collect();
        let decoder = Decoder::from_weights(cfg, renamed, dtype, device, trainable)?;
        let (inv, attention_factor) = cfg.rope().inv_freq(cfg.head_dim());
        Ok(VlText {
            layout: config.mrope,
            decoder,
            inv_freq: inv.into_iter().map(|f| f as f32).collect(),
            attention_factor,
        })
    }

    /// Seeded random weights under checkpoint names (see [`Decoder::random_weights`]).
    pub fn random_weights(config: &VlTextConfig, seed: u64) -> Result<HashMap<String, Tensor>> {
        Ok(Decoder::random_weights(&config.decoder, seed)?
            .into_iter()
            .map(|(n, t)| match n.strip_prefix("model.") {
                Some(rest) => (format!("{LANGUAGE_PREFIX}.{rest}"), t),
                None => (n, t),
            })
            .collect())
    }

    /// The decoder's blocks as a plain Qwen3 (1-D RoPE, `model.…` names).
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The same, mutably (to add or merge LoRA adapters).
    pub fn decoder_mut(&mut self) -> &mut Decoder {
        &mut self.decoder
    }

    /// The rotary layout.
    pub fn layout(&self) -> MropeLayout {
        self.layout
    }

    /// Rotary tables of `positions`.
    pub fn rope(&self, positions: &MropePositions) -> Result<RopeTables> {
        self.layout.tables(
            &positions.positions,
            &self.inv_freq,
            self.attention_factor,
            self.decoder.dtype(),
            self.decoder.device(),
        )
    }

    /// Token embeddings `(batch, seq, hidden)`.
    pub fn embed(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.decoder.embed(input_ids)
    }

    /// Final (normed) hidden states of `embeds` `(batch, seq, hidden)` at `positions`
    /// (shared by every batch row), with the DeepStack features of `deepstack` added at
    /// their positions after the first layers. With a cache, earlier keys and values
    /// are read from it and the new ones appended.
    pub fn forward_hidden(
        &self,
        embeds: &Tensor,
        positions: &MropePositions,
        cache: Option<&mut KvCache>,
        deepstack: Option<&Deepstack>,
    ) -> Result<Tensor> {
        let (b, l, h) = embeds.dims3()?;
        if positions.len() != l {
            candle_core::bail!("{} rotary positions for {l} tokens", positions.len());
        }
        let rope = self.rope(positions)?;
        let layers = self.decoder.config.num_hidden_layers;
        let Some(ds) = deepstack.filter(|d| !d.features.is_empty()) else {
            return self
                .decoder
                .forward_embeds(embeds.clone(), &rope, cache, None, &mut |_, x| Ok(x));
        };
        if ds.features.len() > layers {
            candle_core::bail!(
                "{} DeepStack features for {layers} decoder layers",
                ds.features.len()
            );
        }
        let n = ds.positions.len();
        // Row r of the scattered features: 0 (a zero row) for text, k + 1 for image row k.
        let mut rows = vec![0u32; b * l];
        for (k, &p) in ds.positions.iter().enumerate() {
            let slot = rows.get_mut(p as usize).ok_or_else(|| {
                candle_core::Error::Msg(format!("DeepStack position {p} beyond {b}x{l} tokens"))
            })?;
            if *slot != 0 {
                candle_core::bail!("DeepStack position {p} given twice");
            }
            *slot = k as u32 + 1;
        }
        let rows = Tensor::from_vec(rows, b * l, embeds.device())?;
        let zero = Tensor::zeros((1, h), embeds.dtype(), embeds.device())?;
        let mut scattered = Vec::with_capacity(ds.features.len());
        for (i, f) in ds.features.iter().enumerate() {
            if f.dims() != [n, h] {
                candle_core::bail!(
                    "DeepStack feature {i} is {:?}, expected [{n}, {h}]",
                    f.dims()
                );
            }
            let f = f.to_dtype(embeds.dtype())?;
            scattered.push(
                Tensor::cat(&[&zero, &f], 0)?
                    .index_select(&rows, 0)?
                    .reshape((b, l, h))?,
            );
        }
        self.decoder.forward_embeds(
            embeds.clone(),
            &rope,
            cache,
            None,
            &mut |i, x| match scattered.get(i) {
                Some(s) => x + s,
                None => Ok(x),
            },
        )
    }

    /// LM-head logits `(..., vocab)` of final hidden states.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        self.decoder.logits(hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Qwen3-VL-8B-Instruct's `config.json` (vision part left out).
    const HF: &str = r#"{
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
        "image_token_id": 151655, "video_token_id": 151656,
        "vision_start_token_id": 151652, "vision_end_token_id": 151653,
        "tie_word_embeddings": false,
        "text_config": {
            "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
            "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128,
            "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
            "intermediate_size": 12288, "max_position_embeddings": 262144,
            "model_type": "qwen3_vl_text", "num_attention_heads": 32,
            "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
            "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                             "rope_type": "default"},
            "rope_theta": 5000000, "use_cache": true, "vocab_size": 151936
        }
    }"#;

    #[test]
    fn reads_qwen3_vl_text_config() {
        let cfg = VlTextConfig::from_hf_config(HF).unwrap();
        assert_eq!(cfg.mrope, MropeLayout::interleaved([24, 20, 20]));
        let d = &cfg.decoder;
        assert_eq!(
            (d.hidden_size, d.num_hidden_layers, d.kv_heads()),
            (4096, 36, 8)
        );
        assert_eq!((d.rope_theta, d.rope_scaling.clone()), (5e6, None));
        assert_eq!(d.max_position_embeddings, 262_144);
        assert!(!d.tie_word_embeddings);
        let bad = HF.replace("[24, 20, 20]", "[24, 20, 21]");
        let e = format!("{:#}", VlTextConfig::from_hf_config(&bad).unwrap_err());
        assert!(e.contains("mrope_section"), "{e}");
        let bad = HF.replace("\"mrope_section\": [24, 20, 20],", "");
        let e = format!("{:#}", VlTextConfig::from_hf_config(&bad).unwrap_err());
        assert!(e.contains("names no rope_scaling.mrope_section"), "{e}");
        let bad = HF.replace("\"silu\"", "\"gelu\"");
        let e = format!("{:#}", VlTextConfig::from_hf_config(&bad).unwrap_err());
        assert!(e.contains("hidden_act"), "{e}");
    }

    #[test]
    fn decoder_names_map_checkpoint_names() {
        assert_eq!(
            decoder_name("model.language_model.layers.3.mlp.up_proj.weight").as_deref(),
            Some("model.layers.3.mlp.up_proj.weight")
        );
        assert_eq!(
            decoder_name("lm_head.weight").as_deref(),
            Some("lm_head.weight")
        );
        assert_eq!(decoder_name("model.visual.merger.linear_fc1.weight"), None);
        assert_eq!(decoder_name("model.language_modelx.norm.weight"), None);
    }
}
