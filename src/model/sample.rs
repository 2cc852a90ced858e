//! Decoding with the KV cache: greedy or temperature / top-p sampling, seeded.

use super::constrain::{Closer, Matcher, QuoteGuard};
use super::decoder::{Decoder, KvCache};
use super::prefix::PromptReuse;
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
    model: &Decoder,
    prompt: &[u32],
    stop: &[u32],
    cfg: &SampleConfig,
) -> Result<Vec<u32>> {
    generate_with(model, prompt, stop, cfg, None)
}

/// What constrained decoding needs: the matcher at the start of the output, an
/// optional quoted-span rule, and the raw bytes of every token
/// ([`crate::model::constrain::token_bytes`]).
#[derive(Debug, Clone)]
pub struct Constraint<'a> {
    pub matcher: Matcher,
    /// Quoted spans inside strings must be these values; where no token satisfies
    /// both rules, the schema alone decides and the open span is forgotten.
    pub quotes: Option<QuoteGuard>,
    pub token_bytes: &'a [Option<Vec<u8>>],
}

impl Constraint<'_> {
    /// Picks the next token with [`pick_allowed`] under both rules, under the schema
    /// alone where no token satisfies both, and feeds it to the rules; `None` when
    /// the schema allows nothing.
    pub fn pick(
        &mut self,
        logits: &[f32],
        cfg: &SampleConfig,
        rng: &mut impl Rng,
        stop: &[u32],
    ) -> Option<u32> {
        let next_bytes = std::cell::OnceCell::new();
        let (m, q, bytes) = (&self.matcher, self.quotes.as_ref(), self.token_bytes);
        let t = pick_under_rules(logits, cfg, rng, |t, both| {
            rules_allow(m, q, t, bytes, stop, both, &next_bytes)
        })?;
        if let Some(Some(b)) = bytes.get(t as usize) {
            advance_rules(&mut self.matcher, self.quotes.as_mut(), b);
        }
        Some(t)
    }
}

/// Whether token `t` may come next under a schema's `matcher` and (`both`) the
/// quoted-span rule `quotes`; `next_bytes` caches the matcher's
/// [`Matcher::next_bytes`] for this step. Stop tokens answer to the schema alone.
pub(crate) fn rules_allow(
    matcher: &Matcher,
    quotes: Option<&QuoteGuard>,
    t: u32,
    token_bytes: &[Option<Vec<u8>>],
    stop: &[u32],
    both: bool,
    next_bytes: &std::cell::OnceCell<[bool; 256]>,
) -> bool {
    if !matcher.allows_token_filtered(t, token_bytes, stop, next_bytes) {
        return false;
    }
    match (quotes, token_bytes.get(t as usize)) {
        (Some(q), Some(Some(b))) if both && !stop.contains(&t) => q.after(b).is_some(),
        _ => true,
    }
}

/// [`pick_allowed`] under both rules (`allows(t, true)`), under the schema alone
/// (`allows(t, false)`) where no token satisfies both.
pub(crate) fn pick_under_rules(
    logits: &[f32],
    cfg: &SampleConfig,
    rng: &mut impl Rng,
    allows: impl Fn(u32, bool) -> bool,
) -> Option<u32> {
    pick_allowed(logits, cfg, rng, |t| allows(t, true))
        .or_else(|| pick_allowed(logits, cfg, rng, |t| allows(t, false)))
}

/// Feeds a chosen token's bytes to the rules; a quoted span the token breaks is
/// forgotten (the schema alone chose it).
pub(crate) fn advance_rules(matcher: &mut Matcher, quotes: Option<&mut QuoteGuard>, bytes: &[u8]) {
    matcher.advance(bytes);
    if let Some(q) = quotes
        && !q.advance(bytes)
    {
        q.reset();
    }
}

/// Like [`generate`], but with `constraint` only tokens that keep the output a prefix
/// of a value its schema accepts are chosen, and a stop token only once the value
/// is whole; generation also ends as soon as nothing but whitespace may follow.
/// Before `max_new_tokens` or the model's positions run out, the value is closed the
/// shortest way the schema allows ([`Closer`], spelled in tokens without the
/// model), so a long answer still parses; only a schema whose
/// shortest completion outgrows the budget leaves a prefix.
pub fn generate_with(
    model: &Decoder,
    prompt: &[u32],
    stop: &[u32],
    cfg: &SampleConfig,
    constraint: Option<Constraint<'_>>,
) -> Result<Vec<u32>> {
    generate_reusing(model, prompt, stop, cfg, constraint, None)
}

/// [`generate_with`] that, with `reuse`, encodes only the part of `prompt` after what
/// it shares with the last prompt decoded through `reuse`, and keeps this prompt's
/// cache for the next call. The model's weights must not change between calls
/// ([`PromptReuse::clear`] otherwise). What is generated is the same either way.
pub fn generate_reusing(
    model: &Decoder,
    prompt: &[u32],
    stop: &[u32],
    cfg: &SampleConfig,
    constraint: Option<Constraint<'_>>,
    reuse: Option<&PromptReuse>,
) -> Result<Vec<u32>> {
    let (mut cache, reused) = match reuse {
        Some(r) => r.take(prompt)?,
        None => (KvCache::for_decoding(), 0),
    };
    let dev = model.device().clone();
    let (mut pos, mut first) = (reused, true);
    let step = |tokens: &[u32]| -> Result<Tensor> {
        // The first call brings the whole prompt: its reused positions are cached.
        let tokens = if first { &tokens[reused..] } else { tokens };
        first = false;
        let input = Tensor::new(tokens, &dev)?.unsqueeze(0)?;
        let hidden = model.forward_hidden(&input, pos, Some(&mut cache))?;
        pos += tokens.len();
        // Only the last position's logits are read.
        Ok(model.logits(&hidden.narrow(1, tokens.len() - 1, 1)?)?)
    };
    let out = generate_by(
        step,
        model.config.max_position_embeddings,
        prompt,
        stop,
        cfg,
        constraint,
    )?;
    if let Some(r) = reuse {
        r.keep(prompt.to_vec(), cache);
    }
    Ok(out)
}

/// The decoding loop of [`generate_with`] over any model: `step` takes the prompt,
/// then one token at a time, and returns logits `(1, k, vocab)` continuing its own
/// cache, the last of which predicts the next token (k may be 1); `max_pos` is the
/// model's number of positions.
pub fn generate_by(
    mut step: impl FnMut(&[u32]) -> Result<Tensor>,
    max_pos: usize,
    prompt: &[u32],
    stop: &[u32],
    cfg: &SampleConfig,
    mut constraint: Option<Constraint<'_>>,
) -> Result<Vec<u32>> {
    anyhow::ensure!(!prompt.is_empty(), "empty prompt");
    anyhow::ensure!(
        prompt.len() < max_pos,
        "prompt of {} tokens does not fit the model's {max_pos} positions",
        prompt.len()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut out = Vec::new();
    let mut input: Vec<u32> = prompt.to_vec();
    let mut pos = 0;
    let mut closer = Closer::default();
    for _ in 0..cfg.max_new_tokens {
        let l = input.len();
        let room = cfg.max_new_tokens - out.len();
        let out_of_positions = pos + l > max_pos;
        if let Some(c) = &mut constraint
            && let Some(ids) = closer.due(&c.matcher, room, out_of_positions, c.token_bytes)
        {
            out.extend(ids);
            break;
        }
        if out_of_positions {
            break;
        }
        let logits = step(&input)?;
        pos += l;
        let k = logits.dim(1)?;
        anyhow::ensure!(k > 0, "the model returned no logits");
        let last = logits
            .narrow(1, k - 1, 1)?
            .flatten_all()?
            .to_dtype(DType::F32)?;
        let next = match &mut constraint {
            None => pick(&last, cfg, &mut rng)?,
            Some(c) => {
                let logits: Vec<f32> = last.to_vec1()?;
                let Some(t) = c.pick(&logits, cfg, &mut rng, stop) else {
                    break;
                };
                t
            }
        };
        if stop.contains(&next) {
            break;
        }
        out.push(next);
        if constraint.as_ref().is_some_and(|c| c.matcher.is_done()) {
            break;
        }
        input = vec![next];
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

/// Most tokens looked at, best first, before the whole vocabulary is searched for
/// one the constraint allows.
pub const CANDIDATES: usize = 64;

/// Chooses a token that `allowed` accepts: the most likely one when greedy, else a
/// draw with temperature and top-p among the allowed of the [`CANDIDATES`] most
/// likely (all allowed tokens when none of those is). `None` when nothing is allowed.
pub fn pick_allowed(
    logits: &[f32],
    cfg: &SampleConfig,
    rng: &mut impl Rng,
    allowed: impl Fn(u32) -> bool,
) -> Option<u32> {
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let k = CANDIDATES.min(order.len());
    if k < order.len() {
        order.select_nth_unstable_by(k, by_logit);
    }
    order[..k].sort_by(by_logit);
    let mut cands: Vec<u32> = order[..k].iter().copied().filter(|&t| allowed(t)).collect();
    if cands.is_empty() {
        let mut rest = order[k..].to_vec();
        rest.sort_by(by_logit);
        cands = rest.into_iter().filter(|&t| allowed(t)).collect();
    }
    let &best = cands.first()?;
    if cfg.temperature <= 0.0 {
        return Some(best);
    }
    let top = logits[best as usize];
    let w: Vec<f32> = cands
        .iter()
        .map(|&t| ((logits[t as usize] - top) / cfg.temperature as f32).exp())
        .collect();
    let sum: f32 = w.iter().sum();
    let probs: Vec<f32> = w.iter().map(|x| x / sum).collect();
    Some(cands[nucleus(&probs, cfg.top_p, rng) as usize])
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

    #[test]
    fn pick_allowed_takes_the_best_allowed_token_and_samples_only_allowed_ones() {
        let logits = [0.0f32, 5.0, 4.9, -3.0];
        let greedy = SampleConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            pick_allowed(&logits, &greedy, &mut rng, |t| t != 1),
            Some(2)
        );
        assert_eq!(
            pick_allowed(&logits, &greedy, &mut rng, |t| t == 3),
            Some(3)
        );
        assert_eq!(pick_allowed(&logits, &greedy, &mut rng, |_| false), None);
        let hot = SampleConfig {
            temperature: 1.0,
            ..Default::default()
        };
        let mut seen = [0usize; 4];
        for _ in 0..300 {
            let t = pick_allowed(&logits, &hot, &mut rng, |t| t == 0 || t == 3).unwrap();
            seen[t as usize] += 1;
        }
        assert_eq!(seen[1] + seen[2], 0, "{seen:?}");
        assert!(seen[0] > seen[3] && seen[3] > 0, "{seen:?}");
    }
}
