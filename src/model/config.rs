//! The model configuration, read from (and written as) a Hugging Face `config.json`.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Architecture hyper-parameters of a Qwen3 decoder, as named in HF `config.json`.
///
/// Fields that older or smaller configs omit take Qwen3's defaults; `head_dim`
/// defaults to `hidden_size / num_attention_heads` when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qwen3Config {
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
    1_000_000.0
}
fn default_max_pos() -> usize {
    40_960
}

impl Qwen3Config {
    /// Reads and checks `config.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let cfg: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            anyhow::anyhow!("{}: field `{}`: {}", path.display(), e.path(), e.inner())
        })?;
        cfg.validate()
            .with_context(|| format!("{}: invalid model config", path.display()))?;
        Ok(cfg)
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
    /// need to load the model as `Qwen3ForCausalLM`.
    pub fn to_hf_json(&self) -> serde_json::Value {
        serde_json::json!({
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.kv_heads(),
            "head_dim": self.head_dim(),
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": false,
            "hidden_act": "silu",
            "sliding_window": null,
            "use_sliding_window": false,
            "max_window_layers": self.num_hidden_layers,
            "torch_dtype": "float32",
            "eos_token_id": self.eos_token_id,
        })
    }

    /// Writes `config.json` into `dir`.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let path = dir.as_ref().join("config.json");
        let text = serde_json::to_string_pretty(&self.to_hf_json())?;
        crate::trajectory::jsonl::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Number of parameters (embeddings counted once when tied).
    pub fn num_params(&self) -> usize {
        let (h, hd, i) = (self.hidden_size, self.head_dim(), self.intermediate_size);
        let q = h * self.num_attention_heads * hd;
        let kv = 2 * h * self.kv_heads() * hd;
        let layer = 2 * q + kv + 3 * h * i + 2 * h + 2 * hd;
        let emb = self.vocab_size * h;
        emb * if self.tie_word_embeddings { 1 } else { 2 } + layer * self.num_hidden_layers + h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_minimal_config_with_defaults_and_names_bad_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        std::fs::write(
            &p,
            r#"{"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
                "num_hidden_layers": 1, "num_attention_heads": 2}"#,
        )
        .unwrap();
        let c = Qwen3Config::from_file(&p).unwrap();
        assert_eq!(c.head_dim(), 4);
        assert_eq!(c.kv_heads(), 2);
        std::fs::write(&p, r#"{"vocab_size": "x"}"#).unwrap();
        let e = format!("{:#}", Qwen3Config::from_file(&p).unwrap_err());
        assert!(e.contains("vocab_size"), "{e}");
        std::fs::write(
            &p,
            r#"{"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
                "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2}"#,
        )
        .unwrap();
        assert!(Qwen3Config::from_file(&p).is_err());
    }
}
