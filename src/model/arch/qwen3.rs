//! Qwen3 (`Qwen3ForCausalLM`): per-head q/k RMS norm, grouped-query attention,
//! optional attention biases, no MLP biases.

use super::{ArchSpec, Defaults};

/// transformers' `Qwen3Config`.
pub static SPEC: ArchSpec = ArchSpec {
    model_type: "qwen3",
    causal_lm: "Qwen3ForCausalLM",
    base_model: "Qwen3Model",
    qk_norm: true,
    mlp_bias_key: false,
    defaults: Defaults {
        head_dim: Some(128),
        kv_heads: Some(32),
        rms_norm_eps: 1e-6,
        max_position_embeddings: 32_768,
    },
    inert_keys: &["max_window_layers"],
    write_extra: |_arch, layers, m| {
        m.insert("sliding_window".into(), serde_json::Value::Null);
        m.insert("use_sliding_window".into(), false.into());
        m.insert("max_window_layers".into(), layers.into());
    },
};
