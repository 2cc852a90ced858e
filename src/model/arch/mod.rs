//! The decoder families rmsweb runs, one file each, listed once in [`ARCHS`].
//!
//! As llama.cpp's architecture tables: a family is data — its `model_type`, the class
//! names transformers gives it, its `config.json` defaults, the keys only it has, and
//! the optional parts of its blocks (per-head q/k norm, biases). The decoder
//! ([`super::decoder::Decoder`]) and everything above it are family-agnostic. A new
//! family is one file here and one line in [`ARCHS`]; a `model_type` not listed is
//! refused by name.

mod llama;
mod qwen3;

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// Every family, by `model_type`.
pub static ARCHS: &[&ArchSpec] = &[&qwen3::SPEC, &llama::SPEC];

/// What `config.json` may leave out, as the family's transformers config class fills it.
#[derive(Debug)]
pub struct Defaults {
    /// `None`: `hidden_size / num_attention_heads`.
    pub head_dim: Option<usize>,
    /// `None`: `num_attention_heads` (no grouped-query attention).
    pub kv_heads: Option<usize>,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
}

/// One decoder family.
#[derive(Debug)]
pub struct ArchSpec {
    /// `config.json`'s `model_type`.
    pub model_type: &'static str,
    /// The causal-LM class (`architectures[0]` when written).
    pub causal_lm: &'static str,
    /// The headless class a config may name instead (same weights, no LM head use).
    pub base_model: &'static str,
    /// RMS norm of every query and key head before the rotary embedding (Qwen3).
    pub qk_norm: bool,
    /// Whether `mlp_bias` (biases on the SwiGLU projections) is one of its keys.
    pub mlp_bias_key: bool,
    pub defaults: Defaults,
    /// Keys only this family has that do not change what the decoder computes.
    pub inert_keys: &'static [&'static str],
    /// Extra keys written into `config.json` for transformers to load it as is,
    /// from the model's arch and its number of blocks.
    pub write_extra: fn(&Arch, usize, &mut serde_json::Map<String, serde_json::Value>),
}

/// A model's family and the optional parts its `config.json` switches on.
#[derive(Debug, Clone, Copy)]
pub struct Arch {
    pub spec: &'static ArchSpec,
    /// Biases on q, k, v and o (`attention_bias`).
    pub attention_bias: bool,
    /// Biases on gate, up and down (`mlp_bias`, where the family has the key).
    pub mlp_bias: bool,
}

impl PartialEq for Arch {
    fn eq(&self, o: &Self) -> bool {
        self.spec.model_type == o.spec.model_type
            && self.attention_bias == o.attention_bias
            && self.mlp_bias == o.mlp_bias
    }
}

impl Arch {
    /// Qwen3 without biases (rmsweb's own presets).
    pub fn qwen3() -> Self {
        Self::plain(&qwen3::SPEC)
    }

    /// Llama without biases.
    pub fn llama() -> Self {
        Self::plain(&llama::SPEC)
    }

    fn plain(spec: &'static ArchSpec) -> Self {
        Arch {
            spec,
            attention_bias: false,
            mlp_bias: false,
        }
    }

    /// The family named `model_type`, refused by name when rmsweb does not run it.
    pub fn by_model_type(model_type: &str) -> Result<&'static ArchSpec> {
        ARCHS
            .iter()
            .copied()
            .find(|a| a.model_type == model_type)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "field `model_type`: \"{}\" is not an architecture rmsweb runs ({})",
                    crate::util::sanitize::clean_line(model_type),
                    names()
                )
            })
    }

    /// The family a class name in `architectures` belongs to.
    pub fn by_class(class: &str) -> Option<&'static ArchSpec> {
        ARCHS
            .iter()
            .copied()
            .find(|a| a.causal_lm == class || a.base_model == class)
    }
}

/// The `model_type`s rmsweb runs, for messages.
pub fn names() -> String {
    ARCHS
        .iter()
        .map(|a| a.model_type)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How an [`Arch`] is stored in a serialized config.
#[derive(Serialize, Deserialize)]
struct Stored {
    model_type: String,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    mlp_bias: bool,
}

impl Serialize for Arch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        Stored {
            model_type: self.spec.model_type.to_string(),
            attention_bias: self.attention_bias,
            mlp_bias: self.mlp_bias,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Arch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = Stored::deserialize(d)?;
        let spec = Arch::by_model_type(&s.model_type).map_err(serde::de::Error::custom)?;
        Ok(Arch {
            spec,
            attention_bias: s.attention_bias,
            mlp_bias: s.mlp_bias,
        })
    }
}

impl Default for Arch {
    fn default() -> Self {
        Self::qwen3()
    }
}
