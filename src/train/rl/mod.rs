//! Salvage-DS offline RL (ALGORITHMS.md §5).

pub mod checkpoint;
pub mod config;
pub mod groups;
pub mod loss;
pub mod pg_tokens;
pub mod policy;
pub mod probe;
pub mod prompts;
pub mod report;
pub mod rollout;
pub mod rollout_seeing;
pub(crate) mod sampling;
pub mod seqs;
pub mod sharpening;
pub mod step;
pub mod trainer;
pub mod update;

/// The unit tests' 2-layer decoder, 32 wide, over `vocab` tokens.
#[cfg(test)]
fn test_decoder_config(vocab: usize, max_positions: usize) -> crate::model::DecoderConfig {
    crate::model::DecoderConfig {
        arch: crate::model::arch::Arch::qwen3(),
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
        max_position_embeddings: max_positions,
        eos_token_id: None,
    }
}

/// A 2-layer random model with sharpened (scaled) weights, so that sampling and
/// log-probabilities are far from uniform in unit tests.
#[cfg(test)]
pub(crate) fn test_model(
    vocab: usize,
    seed: u64,
    scale: f64,
    trainable: bool,
) -> crate::model::Decoder {
    use crate::model::Decoder;
    let cfg = test_decoder_config(vocab, 64);
    let mut w = Decoder::random_weights(&cfg, seed).unwrap();
    for v in w.values_mut() {
        if v.rank() == 2 {
            *v = (&*v * scale).unwrap();
        }
    }
    Decoder::from_weights(
        &cfg,
        w,
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
        trainable,
    )
    .unwrap()
}

/// A small random Qwen3-VL model (a 1-block tower over 4-px patches, a 2-layer decoder
/// over 40 tokens: 36 opens an image, 37 closes it, 38 is the image token) whose
/// decoder weights are sharpened by `scale`, and the image preprocessing it expects.
#[cfg(test)]
pub(crate) fn test_vl_model(
    seed: u64,
    scale: f64,
) -> (crate::model::vl::Qwen3Vl, crate::model::vl::VlImageConfig) {
    use crate::model::vl::{
        MropeLayout, Qwen3Vl, VisionConfig, VisionModel, VlConfig, VlImageConfig, VlText,
        VlTextConfig, VlTokenIds,
    };
    let vision = VisionConfig {
        depth: 1,
        hidden_size: 16,
        intermediate_size: 32,
        num_heads: 2,
        patch_size: 4,
        out_hidden_size: 32,
        num_position_embeddings: 16,
        deepstack_visual_indexes: vec![0],
        ..VisionConfig::default()
    };
    let text = VlTextConfig {
        decoder: test_decoder_config(40, 128),
        mrope: MropeLayout::interleaved([2, 1, 1]),
    };
    let mut w = VisionModel::random_weights(&vision, seed).unwrap();
    for (name, t) in VlText::random_weights(&text, seed + 1).unwrap() {
        let t = if t.rank() == 2 {
            (t * scale).unwrap()
        } else {
            t
        };
        w.insert(name, t);
    }
    let config = VlConfig {
        text,
        vision,
        ids: VlTokenIds {
            image_token_id: 38,
            vision_start_token_id: 36,
        },
        vision_end_token_id: Some(37),
        video_token_id: None,
    };
    let (model, _) = Qwen3Vl::from_config_weights(
        &config,
        w,
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
        false,
    )
    .unwrap();
    let image = VlImageConfig {
        patch_size: 4,
        merge_size: 2,
        min_pixels: 64,
        max_pixels: 4096,
        ..VlImageConfig::qwen3_vl()
    };
    (model, image)
}
