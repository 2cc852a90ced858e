//! Group sampling: `n` rollouts of one prompt with the KV cache. The prompt is
//! encoded once and its cache repeated for the batch of `n` continuations, which
//! then decode together, one token per forward pass.

use crate::model::Qwen3;
use anyhow::Result;
use candle_core::{D, DType, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Decoding settings of the rollouts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutConfig {
    pub temperature: f64,
    pub top_p: f64,
    pub max_new_tokens: usize,
}

/// One sampled response.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// Response token ids, ending with the stop token when the model stopped.
    pub ids: Vec<u32>,
    /// Whether it ended with a stop token (else it hit the length limit).
    pub stopped: bool,
    /// Per token of `ids`: its log-probability under the sampling distribution
    /// (logits / temperature) at sampling time.
    pub logps: Vec<f32>,
}

impl Rollout {
    /// The response without its stop token.
    pub fn text_ids(&self) -> &[u32] {
        if self.stopped {
            &self.ids[..self.ids.len().saturating_sub(1)]
        } else {
            &self.ids
        }
    }
}

/// Draws one token from a probability row with nucleus `top_p`.
fn draw(probs: &[f32], top_p: f64, rng: &mut impl Rng) -> u32 {
    if top_p >= 1.0 {
        let total: f64 = probs.iter().map(|&p| f64::from(p)).sum();
        let mut u = rng.random::<f64>() * total;
        for (i, &p) in probs.iter().enumerate() {
            u -= f64::from(p);
            if u <= 0.0 {
                return i as u32;
            }
        }
        return probs.len().saturating_sub(1) as u32;
    }
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

/// Samples `n` responses to `prompt` (token ids), each stopping after any id in
/// `stop` or `max_new_tokens`. Row `i` draws from its own generator seeded by
/// `(seed, i)`, so a group is reproducible.
pub fn sample_group(
    model: &Qwen3,
    prompt: &[u32],
    n: usize,
    stop: &[u32],
    cfg: &RolloutConfig,
    seed: u64,
) -> Result<Vec<Rollout>> {
    anyhow::ensure!(!prompt.is_empty(), "empty prompt");
    let max_pos = model.config.max_position_embeddings;
    anyhow::ensure!(
        prompt.len() < max_pos,
        "prompt of {} tokens does not fit the model's {max_pos} positions",
        prompt.len()
    );
    let dev = model.device();
    let mut rngs: Vec<ChaCha8Rng> = (0..n)
        .map(|i| ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let mut out: Vec<Rollout> = (0..n)
        .map(|_| Rollout {
            ids: Vec::new(),
            stopped: false,
            logps: Vec::new(),
        })
        .collect();
    let mut cache = crate::model::KvCache::new();
    let input = Tensor::new(prompt, dev)?.unsqueeze(0)?;
    let logits = model.forward(&input, 0, Some(&mut cache))?;
    let mut last = logits.narrow(1, prompt.len() - 1, 1)?.squeeze(1)?; // (1, vocab)
    last = last.broadcast_as((n, last.dim(1)?))?.contiguous()?;
    let mut cache = cache.repeat_batch(n)?;
    let mut pos = prompt.len();
    let filler = stop.first().copied().unwrap_or(0);
    for _ in 0..cfg.max_new_tokens {
        let scaled = (last.to_dtype(DType::F32)? / cfg.temperature)?;
        let logp: Vec<Vec<f32>> = candle_nn::ops::log_softmax(&scaled, D::Minus1)?.to_vec2()?;
        let probs: Vec<Vec<f32>> = logp
            .iter()
            .map(|row| row.iter().map(|x| x.exp()).collect())
            .collect();
        let mut next = Vec::with_capacity(n);
        for (i, r) in out.iter_mut().enumerate() {
            if r.stopped {
                next.push(filler);
                continue;
            }
            let t = draw(&probs[i], cfg.top_p, &mut rngs[i]);
            r.ids.push(t);
            r.logps.push(logp[i][t as usize]);
            if stop.contains(&t) {
                r.stopped = true;
            }
            next.push(t);
        }
        if out.iter().all(|r| r.stopped) || pos + 1 > max_pos {
            break;
        }
        let input = Tensor::from_vec(next, (n, 1), dev)?;
        let logits = model.forward(&input, pos, Some(&mut cache))?;
        pos += 1;
        last = logits.squeeze(1)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_respects_the_nucleus_and_the_distribution() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let probs = [0.0f32, 0.6, 0.3, 0.1];
        let mut seen = [0usize; 4];
        for _ in 0..2000 {
            seen[draw(&probs, 1.0, &mut rng) as usize] += 1;
        }
        assert_eq!(seen[0], 0);
        assert!(
            seen[1] > seen[2] && seen[2] > seen[3] && seen[3] > 0,
            "{seen:?}"
        );
        let mut seen = [0usize; 4];
        for _ in 0..500 {
            seen[draw(&probs, 0.85, &mut rng) as usize] += 1;
        }
        assert_eq!(seen[0] + seen[3], 0, "{seen:?}");
    }
}
