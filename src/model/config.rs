//! The model configuration, read from (and written as) a Hugging Face `config.json`.

use super::arch::{Arch, ArchSpec};
use super::rope::{RopeScaling, RopeSpec};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Architecture hyper-parameters of a decoder of one of the families in
/// [`super::arch`], as named in HF `config.json`.
///
/// [`DecoderConfig::from_file`] reads what transformers writes (every release's rotary
/// spelling, see [`super::rope`]) and takes the defaults of the family's transformers
/// config class for absent keys. Keys that would make transformers compute something
/// this decoder does not (sliding windows, another activation, quantization, another
/// architecture, or any key it does not know) are refused with the key's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecoderConfig {
    /// The family (`model_type`) and the optional parts its config switches on.
    #[serde(default)]
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    /// Rotary scaling (`rope_parameters` / `rope_scaling`); `None` is plain RoPE.
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    /// Token that ends a turn; generation stops there (also read from the tokenizer).
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
}

fn default_eps() -> f64 {
    1e-6
}
fn default_theta() -> f64 {
    super::rope::DEFAULT_THETA
}
fn default_max_pos() -> usize {
    32_768
}

/// Keys read into [`DecoderConfig`] or its rotary embedding.
const READ_KEYS: &[&str] = &[
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "partial_rotary_factor",
    "original_max_position_embeddings",
    "tie_word_embeddings",
    "max_position_embeddings",
    "eos_token_id",
    "attention_bias",
];

/// Keys that do not change what the decoder computes: bookkeeping, token ids,
/// generation defaults, labels (`PretrainedConfig`'s common attributes).
const INERT_KEYS: &[&str] = &[
    "architectures",
    "model_type",
    "transformers_version",
    "torch_dtype",
    "dtype",
    "_name_or_path",
    "_model_name_or_path",
    "name_or_path",
    "bos_token_id",
    "pad_token_id",
    "unk_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "use_cache",
    "initializer_range",
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "torchscript",
    "use_bfloat16",
    "tf_legacy_loss",
    "chunk_size_feed_forward",
    "finetuning_task",
    "id2label",
    "label2id",
    "tokenizer_class",
    "prefix",
    "task_specific_params",
    "problem_type",
    "is_decoder",
    "is_encoder_decoder",
    "add_cross_attention",
    "cross_attention_hidden_size",
    "tie_encoder_decoder",
    "max_length",
    "min_length",
    "do_sample",
    "early_stopping",
    "num_beams",
    "num_beam_groups",
    "diversity_penalty",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "bad_words_ids",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
    "unsloth_version",
    "unsloth_fixed",
];

/// Keys that change the computation, accepted only at the value this decoder computes
/// (the value transformers takes by default).
fn check_fixed_keys(obj: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
    use serde_json::Value;
    let sliding = obj.get("use_sliding_window").unwrap_or(&Value::Null);
    anyhow::ensure!(
        matches!(sliding, Value::Null | Value::Bool(false)),
        "field `use_sliding_window`: {sliding} is not supported (sliding-window attention)"
    );
    for (key, ok) in [
        ("hidden_act", &[Value::from("silu")][..]),
        ("use_mrope", &[Value::Bool(false)]),
    ] {
        if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
            anyhow::ensure!(
                ok.contains(v),
                "field `{key}`: {v} is not supported (only {})",
                ok[0]
            );
        }
    }
    if let Some(v) = obj.get("attention_dropout").filter(|v| !v.is_null()) {
        anyhow::ensure!(
            v.as_f64() == Some(0.0),
            "field `attention_dropout`: {v} is not supported (only 0)"
        );
    }
    if let Some(v) = obj.get("layer_types").filter(|v| !v.is_null()) {
        let all_full = v
            .as_array()
            .is_some_and(|a| a.iter().all(|t| t == "full_attention"));
        anyhow::ensure!(
            all_full,
            "field `layer_types`: only `full_attention` layers are supported, got {v}"
        );
    }
    if let Some(v) = obj.get("pruned_heads").filter(|v| !v.is_null()) {
        anyhow::ensure!(
            v.as_object().is_some_and(|m| m.is_empty()),
            "field `pruned_heads`: pruned attention heads are not supported"
        );
    }
    Ok(())
}

/// The family a `config.json` describes (`model_type`, else the class in
/// `architectures`, else Qwen3 as rmsweb's own checkpoints before Llama), or why it
/// does not describe a decoder this crate runs as is.
fn check_architecture(
    obj: &serde_json::Map<String, serde_json::Value>,
) -> Result<&'static ArchSpec> {
    let clean =
        |v: &serde_json::Value| crate::util::sanitize::clean_line(&v.to_string()).into_owned();
    let by_type = match obj.get("model_type").filter(|v| !v.is_null()) {
        Some(serde_json::Value::String(t)) => Some(Arch::by_model_type(t)?),
        Some(t) => anyhow::bail!("field `model_type`: {} is not a string", clean(t)),
        None => None,
    };
    let mut by_class = None;
    if let Some(a) = obj.get("architectures").filter(|v| !v.is_null()) {
        let classes: Vec<&str> = a
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let specs: Vec<Option<&'static ArchSpec>> =
            classes.iter().map(|c| Arch::by_class(c)).collect();
        let ok = !classes.is_empty()
            && a.as_array().is_some_and(|x| x.len() == classes.len())
            && specs
                .iter()
                .all(|s| s.is_some_and(|s| by_type.is_none_or(|t| t.model_type == s.model_type)))
            && specs
                .windows(2)
                .all(|w| w[0].map(|s| s.model_type) == w[1].map(|s| s.model_type));
        anyhow::ensure!(
            ok,
            "field `architectures`: {} is not {} (another head computes other outputs)",
            clean(a),
            by_type.map_or_else(
                || super::arch::ARCHS
                    .iter()
                    .map(|s| s.causal_lm)
                    .collect::<Vec<_>>()
                    .join(" or "),
                |t| t.causal_lm.to_string()
            )
        );
        by_class = specs[0];
    }
    for key in ["quantization_config", "auto_map"] {
        anyhow::ensure!(
            obj.get(key).is_none_or(|v| v.is_null()),
            "field `{key}`: {} models are not supported",
            if key == "auto_map" {
                "custom-code"
            } else {
                "quantized"
            }
        );
    }
    Ok(by_type.or(by_class).unwrap_or(Arch::qwen3().spec))
}

/// Refuses a key rmsweb neither reads nor knows to be inert (for every family, or for
/// this one), since it may change what the model computes.
fn check_known_keys(
    obj: &serde_json::Map<String, serde_json::Value>,
    spec: &ArchSpec,
) -> Result<()> {
    let fixed = [
        "use_sliding_window",
        "sliding_window",
        "hidden_act",
        "use_mrope",
        "attention_dropout",
        "layer_types",
        "pruned_heads",
        "quantization_config",
        "auto_map",
    ];
    for key in obj.keys() {
        let k = key.as_str();
        let own = spec.inert_keys.contains(&k) || (spec.mlp_bias_key && k == "mlp_bias");
        anyhow::ensure!(
            READ_KEYS.contains(&k) || INERT_KEYS.contains(&k) || fixed.contains(&k) || own,
            "field `{}`: unknown to rmsweb's {} decoder; refused rather than ignored, \
             since it may change what the model computes",
            crate::util::sanitize::clean_line(k),
            spec.model_type
        );
    }
    Ok(())
}

/// A boolean key of `obj` (absent or null: false), named in the error.
fn flag(obj: &serde_json::Map<String, serde_json::Value>, key: &str) -> Result<bool> {
    match obj.get(key) {
        None | Some(serde_json::Value::Null) => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(v) => anyhow::bail!(
            "field `{key}`: expected true or false, got {}",
            crate::util::sanitize::clean_line(&v.to_string())
        ),
    }
}

impl DecoderConfig {
    /// Reads and checks `config.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let v = crate::util::read_json_file(path)?;
        let cfg =
            Self::from_hf_json(&v).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        cfg.validate()
            .with_context(|| format!("{}: invalid model config", path.display()))?;
        Ok(cfg)
    }

    /// Reads a `config.json` value (see the type's docs for what is refused).
    pub fn from_hf_json(v: &serde_json::Value) -> Result<Self> {
        let obj = v
            .as_object()
            .ok_or_else(|| anyhow::anyhow!("expected a JSON object"))?;
        let spec = check_architecture(obj)?;
        check_fixed_keys(obj)?;
        check_known_keys(obj, spec)?;
        #[derive(Deserialize)]
        struct Shape {
            vocab_size: usize,
            hidden_size: usize,
            intermediate_size: usize,
            num_hidden_layers: usize,
            num_attention_heads: usize,
            #[serde(default)]
            num_key_value_heads: Option<usize>,
            #[serde(default)]
            head_dim: Option<usize>,
            #[serde(default)]
            rms_norm_eps: Option<f64>,
            #[serde(default)]
            tie_word_embeddings: Option<bool>,
            #[serde(default)]
            max_position_embeddings: Option<usize>,
            #[serde(default)]
            eos_token_id: Option<serde_json::Value>,
        }
        let shape: Shape = serde_path_to_error::deserialize(v)
            .map_err(|e| anyhow::anyhow!("field `{}`: {}", e.path(), e.inner()))?;
        let d = &spec.defaults;
        let max_position_embeddings = shape
            .max_position_embeddings
            .unwrap_or(d.max_position_embeddings);
        let rope = RopeSpec::from_hf(obj, max_position_embeddings)?;
        let arch = Arch {
            spec,
            attention_bias: flag(obj, "attention_bias")?,
            mlp_bias: spec.mlp_bias_key && flag(obj, "mlp_bias")?,
        };
        Ok(DecoderConfig {
            arch,
            vocab_size: shape.vocab_size,
            hidden_size: shape.hidden_size,
            intermediate_size: shape.intermediate_size,
            num_hidden_layers: shape.num_hidden_layers,
            num_attention_heads: shape.num_attention_heads,
            num_key_value_heads: Some(
                shape
                    .num_key_value_heads
                    .or(d.kv_heads)
                    .unwrap_or(shape.num_attention_heads),
            ),
            head_dim: Some(
                shape
                    .head_dim
                    .or(d.head_dim)
                    .unwrap_or(shape.hidden_size / shape.num_attention_heads.max(1)),
            ),
            rms_norm_eps: shape.rms_norm_eps.unwrap_or(d.rms_norm_eps),
            rope_theta: rope.theta,
            rope_scaling: rope.scaling,
            tie_word_embeddings: shape.tie_word_embeddings.unwrap_or(false),
            max_position_embeddings,
            eos_token_id: shape.eos_token_id,
        })
    }

    /// The rotary embedding.
    pub fn rope(&self) -> RopeSpec {
        RopeSpec {
            theta: self.rope_theta,
            scaling: self.rope_scaling.clone(),
        }
    }

    /// Rejects shapes the decoder cannot run (zero sizes, heads not divisible).
    pub fn validate(&self) -> Result<()> {
        let kv = self.kv_heads();
        anyhow::ensure!(self.vocab_size > 0, "vocab_size must be positive");
        anyhow::ensure!(self.hidden_size > 0, "hidden_size must be positive");
        anyhow::ensure!(
            self.num_attention_heads > 0,
            "num_attention_heads must be positive"
        );
        anyhow::ensure!(kv > 0, "num_key_value_heads must be positive");
        anyhow::ensure!(
            self.num_attention_heads.is_multiple_of(kv),
            "num_attention_heads ({}) is not a multiple of num_key_value_heads ({kv})",
            self.num_attention_heads
        );
        anyhow::ensure!(
            self.head_dim().is_multiple_of(2) && self.head_dim() > 0,
            "head_dim must be even and positive"
        );
        Ok(())
    }

    /// Key/value heads (grouped-query attention); defaults to the attention heads.
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Per-head dimension.
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// The `config.json` text, with the fields HF transformers (and candle-transformers)
    /// need to load the model as its family's causal LM. The rotary embedding is
    /// written in both spellings: `rope_parameters` (transformers 5) and `rope_theta` +
    /// `rope_scaling` (earlier releases, candle); they describe the same embedding.
    pub fn to_hf_json(&self) -> serde_json::Value {
        let spec = self.arch.spec;
        let mut v = serde_json::json!({
            "architectures": [spec.causal_lm],
            "model_type": spec.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.kv_heads(),
            "head_dim": self.head_dim(),
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope().to_rope_scaling(),
            "rope_parameters": self.rope().to_rope_parameters(),
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": self.arch.attention_bias,
            "hidden_act": "silu",
            "torch_dtype": "float32",
            "eos_token_id": self.eos_token_id,
        });
        if let Some(m) = v.as_object_mut() {
            (spec.write_extra)(&self.arch, self.num_hidden_layers, m);
        }
        v
    }

    /// Writes `config.json` into `dir`.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let path = dir.as_ref().join("config.json");
        let text = serde_json::to_string_pretty(&self.to_hf_json())?;
        crate::util::fs::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Number of parameters (embeddings counted once when tied).
    pub fn num_params(&self) -> usize {
        let (h, hd, i) = (self.hidden_size, self.head_dim(), self.intermediate_size);
        let (qd, kvd) = (self.num_attention_heads * hd, self.kv_heads() * hd);
        let q = h * qd;
        let kv = 2 * h * kvd;
        let qk_norm = if self.arch.spec.qk_norm { 2 * hd } else { 0 };
        let attn_bias = if self.arch.attention_bias {
            qd + 2 * kvd + h
        } else {
            0
        };
        let mlp_bias = if self.arch.mlp_bias { 2 * i + h } else { 0 };
        let layer = 2 * q + kv + 3 * h * i + 2 * h + qk_norm + attn_bias + mlp_bias;
        let emb = self.vocab_size * h;
        emb * if self.tie_word_embeddings { 1 } else { 2 } + layer * self.num_hidden_layers + h
    }
}

#[cfg(test)]
mod tests;
