//! Decoding with the KV cache: greedy or temperature / top-p sampling, seeded.

use super::qwen3::{KvCache, Qwen3};
use anyhow::Result;
use candle_core::{D, DType, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Decoding settings. `temperature == 0` means greedy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleConfig {
    pub temperature: f64,
    pub top_p: f64,
    pub max_new_tokens: usize,
    pub seed: u64,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            temperature: 0.0,
            top_p: 1.0,
            max_new_tokens: 512,
            seed: 42,
        }
    }
}

/// Generates up to `max_new_tokens` after `prompt`, stopping after any of `stop` ids
/// (the stop token is not returned).
pub fn generate(
    model: &Qwen3,
    prompt: &[u32],
    stop: &[u32],
    cfg: &SampleConfig,
) -> Result<Vec<u32>> {
    anyhow::ensure!(!prompt.is_empty(), "empty prompt");
    let max_pos = model.config.max_position_embeddings;
    anyhow::ensure!(
        prompt.len() < max_pos,
        "prompt of {} tokens does not fit the model's {max_pos} positions",
        prompt.len()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut cache = KvCache::for_decoding();
    let dev = model.device();
    let mut out = Vec::new();
    let mut input = Tensor::new(prompt, dev)?.unsqueeze(0)?;
    let mut pos = 0;
    for _ in 0..cfg.max_new_tokens {
        let l = input.dim(1)?;
        if pos + l > max_pos {
            break;
        }
        let logits = model.forward(&input, pos, Some(&mut cache))?;
        pos += l;
        let last = logits
            .narrow(1, l - 1, 1)?
            .flatten_all()?
            .to_dtype(DType::F32)?;
        let next = pick(&last, cfg, &mut rng)?;
        if stop.contains(&next) {
            break;
        }
        out.push(next);
        input = Tensor::new(&[next], dev)?.unsqueeze(0)?;
    }
    Ok(out)
}

/// Chooses a token from last-position logits.
pub fn pick(logits: &Tensor, cfg: &SampleConfig, rng: &mut impl Rng) -> Result<u32> {
    if cfg.temperature <= 0.0 {
        return Ok(logits.argmax(D::Minus1)?.to_scalar::<u32>()?);
    }
    let probs = candle_nn::ops::softmax(&(logits / cfg.temperature)?, D::Minus1)?;
    let probs: Vec<f32> = probs.to_vec1()?;
    Ok(nucleus(&probs, cfg.top_p, rng))
}

/// Draws a token from a probability row restricted to its nucleus: the most likely
/// tokens whose mass first reaches `top_p` (tokens visited in descending order).
pub fn nucleus(probs: &[f32], top_p: f64, rng: &mut impl Rng) -> u32 {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    let mut kept = Vec::new();
    let mut mass = 0.0f64;
    for i in order {
        kept.push(i);
        mass += f64::from(probs[i]);
        if mass >= top_p {
            break;
        }
    }
    let mut u = rng.random::<f64>() * mass;
    for &i in &kept {
        u -= f64::from(probs[i]);
        if u <= 0.0 {
            return i as u32;
        }
    }
    kept.last().copied().unwrap_or(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn top_p_keeps_only_the_nucleus_and_greedy_takes_max() {
        let logits = Tensor::new(&[0.0f32, 5.0, 4.9, -3.0], &Device::Cpu).unwrap();
        let greedy = SampleConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(pick(&logits, &greedy, &mut rng).unwrap(), 1);
        let nucleus = SampleConfig {
            temperature: 1.0,
            top_p: 0.9,
            ..Default::default()
        };
        let mut seen = [0usize; 4];
        for _ in 0..200 {
            seen[pick(&logits, &nucleus, &mut rng).unwrap() as usize] += 1;
        }
        assert!(seen[1] > 0 && seen[2] > 0, "{seen:?}");
        assert_eq!(seen[0] + seen[3], 0, "{seen:?}");
    }
}
