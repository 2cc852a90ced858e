//! Salvage-DS offline RL (ALGORITHMS.md §5).

pub mod checkpoint;
pub mod config;
pub mod groups;
pub mod loss;
pub mod policy;
pub mod probe;
pub mod prompts;
pub mod report;
pub mod rollout;
pub mod seqs;
pub mod sharpening;
pub mod trainer;
pub mod update;

/// A 2-layer random model with sharpened (scaled) weights, so that sampling and
/// log-probabilities are far from uniform in unit tests.
#[cfg(test)]
pub(crate) fn test_model(
    vocab: usize,
    seed: u64,
    scale: f64,
    trainable: bool,
) -> crate::model::Qwen3 {
    use crate::model::{Qwen3, Qwen3Config};
    let cfg = Qwen3Config {
        vocab_size: vocab,
        hidden_size: 32,
        intermediate_size: 48,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        head_dim: Some(8),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: true,
        max_position_embeddings: 64,
        eos_token_id: None,
    };
    let mut w = Qwen3::random_weights(&cfg, seed).unwrap();
    for v in w.values_mut() {
        if v.rank() == 2 {
            *v = (&*v * scale).unwrap();
        }
    }
    Qwen3::from_weights(
        &cfg,
        w,
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
        trainable,
    )
    .unwrap()
}
