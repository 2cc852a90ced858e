//! Llama (`LlamaForCausalLM`, SmolLM2 among others): no q/k norm, optional biases on
//! the attention and on the MLP projections, tied or untied head.

use super::{ArchSpec, Defaults};

/// transformers' `LlamaConfig`.
pub static SPEC: ArchSpec = ArchSpec {
    model_type: "llama",
    causal_lm: "LlamaForCausalLM",
    base_model: "LlamaModel",
    qk_norm: false,
    mlp_bias_key: true,
    defaults: Defaults {
        head_dim: None,
        kv_heads: None,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 2048,
    },
    // Tensor-parallel slicing of the projections at pretraining: the same sums.
    inert_keys: &["pretraining_tp"],
    write_extra: |arch, _layers, m| {
        m.insert("mlp_bias".into(), arch.mlp_bias.into());
    },
};
