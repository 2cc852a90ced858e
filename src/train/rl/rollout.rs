//! Group sampling: `n` rollouts of one prompt with the KV cache. The prompt is
//! encoded once and its cache repeated for the batch of `n` continuations, which
//! then decode together, one token per forward pass.

use crate::model::kv_cache::left_pad_mask;
use crate::model::prefix::PrefixCache;
use crate::model::sample::{Constraint, SampleConfig};
use crate::model::{Decoder, KvCache};
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
#[derive(Debug, Clone, PartialEq, Default)]
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
    crate::model::sample::nucleus(probs, top_p, rng)
}

/// What a batch of groups decodes under besides the settings.
#[derive(Clone, Copy, Default)]
pub struct GroupDecoding<'a> {
    /// One constraint per prompt: every row of a group decodes under its own copy of
    /// its prompt's ([`Constraint::pick`], among the allowed of the most likely
    /// tokens, at the temperature and top-p); a row the schema leaves no token ends
    /// unstopped. Each token's log-probability is still the model's own over the
    /// whole vocabulary, the one the update recomputes.
    pub rules: Option<&'a [Constraint<'a>]>,
    /// A prefix already encoded with the same weights (the system prompt all RL
    /// prompts share): when every prompt continues it, only what follows it is
    /// encoded, in one batch for prompts of one length, else each prompt alone
    /// after its own copy, then turned to a common next position (see
    /// [`sample_groups`]). What is drawn is the same either way.
    pub prefix: Option<&'a PrefixCache>,
    /// Tokens free decoding never draws (a Qwen3-VL model's image tokens: a response
    /// is text). Grounded rows draw only what their rule allows anyway.
    pub banned: &'a [u32],
}

/// Samples `n` responses to `prompt` (token ids), each stopping after any id in
/// `stop` or `max_new_tokens`. Row `i` draws from its own generator seeded by
/// `(seed, i)`, so a group is reproducible.
pub fn sample_group(
    model: &Decoder,
    prompt: &[u32],
    n: usize,
    stop: &[u32],
    cfg: &RolloutConfig,
    seed: u64,
) -> Result<Vec<Rollout>> {
    Ok(sample_groups(
        model,
        &[prompt],
        n,
        stop,
        cfg,
        &[seed],
        GroupDecoding::default(),
    )?
    .pop()
    .unwrap_or_default())
}

/// [`sample_group`] for several prompts at once: the prompts are left-padded to a
/// common length (padding masked out of attention), encoded in one batch, each
/// prompt's cache repeated for its `n` rows, and all rows decode together.
/// Row `i` of group `g` draws from a generator seeded by `(seeds[g], i)`, as
/// [`sample_group`] does, so batching does not change what is drawn. `with` adds
/// per-prompt rules and a shared encoded prefix. Prompts of different lengths that
/// all continue the prefix are encoded one by one after a copy of it (padding
/// cannot sit between the prefix and the rest), and each one's cached keys are
/// turned by its padding so that every next token sits at one position: rotary
/// embeddings are relative, so that is the same as encoding it left-padded.
pub fn sample_groups(
    model: &Decoder,
    prompts: &[&[u32]],
    n: usize,
    stop: &[u32],
    cfg: &RolloutConfig,
    seeds: &[u64],
    with: GroupDecoding<'_>,
) -> Result<Vec<Vec<Rollout>>> {
    let rules = with.rules;
    anyhow::ensure!(
        !prompts.is_empty() && seeds.len() == prompts.len(),
        "one seed per prompt"
    );
    anyhow::ensure!(
        rules.is_none_or(|r| r.len() == prompts.len()),
        "one constraint per prompt"
    );
    anyhow::ensure!(prompts.iter().all(|p| !p.is_empty()), "empty prompt");
    let max_pos = model.config.max_position_embeddings;
    let lmax = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    anyhow::ensure!(
        lmax < max_pos,
        "prompt of {lmax} tokens does not fit the model's {max_pos} positions"
    );
    let dev = model.device();
    let g = prompts.len();
    let padded = prompts.iter().any(|p| p.len() < lmax);
    let prefix = with
        .prefix
        .filter(|p| prompts.iter().all(|q| p.continued_by(q)));
    let d = Decode {
        n,
        stop,
        cfg,
        seeds,
        rules,
        banned: with.banned,
    };
    let mut step = |input: &Tensor, pos: usize, cache: &mut KvCache, km: Option<&Tensor>| {
        Ok(model.forward_hidden_masked(input, pos, Some(cache), km)?)
    };
    if let (true, Some(prefix)) = (padded, prefix) {
        let (first, cache, key_mask) = encode_after_prefix(model, prompts, prefix, cfg)?;
        return decode_rows(model, &first, cache, Some(key_mask), lmax, &d, &mut step);
    }
    // The shared prefix's positions come from its cache (unpadded prompts here).
    let start = prefix.map_or(0, PrefixCache::len);
    let rest = lmax - start;
    let mut ids = Vec::with_capacity(g * rest);
    let mut key_mask: Vec<Vec<f32>> = Vec::with_capacity(g);
    for p in prompts {
        let pads = lmax - p.len();
        ids.extend(std::iter::repeat_n(0u32, pads));
        ids.extend_from_slice(&p[start..]);
        key_mask.push(left_pad_mask(pads, lmax));
    }
    let mut cache = match prefix {
        Some(p) => p.copies(g)?,
        // Room for every token a row may decode: the buffers never grow.
        None => KvCache::for_decoding_with_headroom(cfg.max_new_tokens + 1),
    };
    let input = Tensor::from_vec(ids, (g, rest), dev)?;
    let km = if padded {
        let flat: Vec<f32> = key_mask.iter().flatten().copied().collect();
        Some(Tensor::from_vec(flat, (g, lmax), dev)?)
    } else {
        None
    };
    let hidden = model.forward_hidden_masked(&input, start, Some(&mut cache), km.as_ref())?;
    let first = model.logits(&hidden.narrow(1, rest - 1, 1)?)?.squeeze(1)?; // (g, vocab)
    let key_mask = padded.then_some(key_mask);
    decode_rows(model, &first, cache, key_mask, lmax, &d, &mut step)
}

/// Prompts of different lengths that all continue `prefix`: each encoded alone after
/// a copy of it, its keys turned by its padding (so that its next token sits at the
/// longest prompt's length), stacked left-padded. Returns the logits after each
/// prompt `(groups, vocab)`, the cache and its key mask.
fn encode_after_prefix(
    model: &Decoder,
    prompts: &[&[u32]],
    prefix: &PrefixCache,
    cfg: &RolloutConfig,
) -> Result<(Tensor, KvCache, Vec<Vec<f32>>)> {
    let lmax = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    let start = prefix.len();
    let (mut parts, mut lasts, mut key_mask) = (Vec::new(), Vec::new(), Vec::new());
    for p in prompts {
        let mut cache = prefix.copies(1)?;
        let rest = Tensor::new(&p[start..], model.device())?.unsqueeze(0)?;
        let hidden = model.forward_hidden(&rest, start, Some(&mut cache))?;
        lasts.push(hidden.narrow(1, p.len() - start - 1, 1)?);
        let pads = lmax - p.len();
        parts.push(match pads {
            0 => cache,
            _ => cache.turned(&model.rope_at(pads, 1)?)?,
        });
        key_mask.push(left_pad_mask(pads, lmax));
    }
    // Room for every token a row may decode: the buffers never grow.
    let cache = KvCache::stack_left_padded(&parts, cfg.max_new_tokens + 1)?;
    let first = model.logits(&Tensor::cat(&lasts, 0)?)?.squeeze(1)?;
    Ok((first, cache, key_mask))
}

/// What the rows of a batch of groups decode under.
pub(super) struct Decode<'a, 'r> {
    pub n: usize,
    pub stop: &'a [u32],
    pub cfg: &'a RolloutConfig,
    /// One per group.
    pub seeds: &'a [u64],
    /// One per group.
    pub rules: Option<&'a [Constraint<'r>]>,
    /// Tokens free decoding never draws (a Qwen3-VL model's image tokens: a
    /// response is text).
    pub banned: &'a [u32],
}

/// One forward step of the decoding rows: token ids `(rows, 1)` at position `pos`
/// after `cache`, with the rows' key mask when the prompts were padded; returns the
/// final hidden states `(rows, 1, hidden)`.
pub(super) type Step<'s> =
    dyn FnMut(&Tensor, usize, &mut KvCache, Option<&Tensor>) -> Result<Tensor> + 's;

/// Sample `i` of a group's random stream, from the group's seed.
fn row_rng(seed: u64, i: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A row's next token from its log-probs `logp` (already at the temperature): drawn
/// under top-p with the banned tokens removed, or picked by the row's rule. `None`:
/// the rule allows nothing more.
fn pick_token(
    rule: Option<&mut Constraint<'_>>,
    logp: &[f32],
    d: &Decode<'_, '_>,
    rng: &mut ChaCha8Rng,
) -> Option<u32> {
    match rule {
        None => {
            let mut probs: Vec<f32> = logp.iter().map(|x| x.exp()).collect();
            for &t in d.banned {
                if let Some(p) = probs.get_mut(t as usize) {
                    *p = 0.0;
                }
            }
            Some(draw(&probs, d.cfg.top_p, rng))
        }
        Some(c) => {
            let pick_cfg = SampleConfig {
                temperature: 1.0,
                top_p: d.cfg.top_p,
                ..SampleConfig::default()
            };
            c.pick(logp, &pick_cfg, rng, d.stop)
        }
    }
}

/// Decodes `d.n` rows per group from each group's logits after its prompt `first`
/// `(groups, vocab)` and its cache (one row per group, `pos` positions, the per-group
/// key mask when padded), one token per `step`.
// Kept whole: one decoding loop whose rows' state (cache, key masks, random streams,
// rules, the rows still in the batch) changes together at every token.
pub(super) fn decode_rows(
    decoder: &Decoder,
    first: &Tensor,
    cache: KvCache,
    key_mask: Option<Vec<Vec<f32>>>,
    pos: usize,
    d: &Decode<'_, '_>,
    step: &mut Step<'_>,
) -> Result<Vec<Vec<Rollout>>> {
    let (n, stop, cfg) = (d.n, d.stop, d.cfg);
    let g = d.seeds.len();
    let rows = g * n;
    let dev = decoder.device();
    let max_pos = decoder.config.max_position_embeddings;
    let padded = key_mask.is_some();
    let key_mask = key_mask.unwrap_or_else(|| vec![Vec::new(); g]);
    let mask_tensor = |m: &[Vec<f32>], width: usize| -> Result<Tensor> {
        let flat: Vec<f32> = m.iter().flat_map(|r| r.iter().copied()).collect();
        Ok(Tensor::from_vec(flat, (m.len(), width), dev)?)
    };
    let row_group: Vec<u32> = (0..rows).map(|r| (r / n) as u32).collect();
    let idx = Tensor::from_vec(row_group.clone(), rows, dev)?;
    let mut last = first.index_select(&idx, 0)?;
    let mut cache = cache.select_batch(&idx)?;
    let mut row_mask: Vec<Vec<f32>> = row_group
        .iter()
        .map(|&gi| key_mask[gi as usize].clone())
        .collect();
    let mut rngs: Vec<ChaCha8Rng> = (0..rows)
        .map(|r| row_rng(d.seeds[r / n], (r % n) as u64))
        .collect();
    let mut out: Vec<Rollout> = (0..rows).map(|_| Rollout::default()).collect();
    let mut row_rules: Vec<Option<Constraint<'_>>> = row_group
        .iter()
        .map(|&gi| d.rules.map(|r| r[gi as usize].clone()))
        .collect();
    // Rows that ended without a stop token (nothing allowed).
    let mut ended = vec![false; rows];
    let mut pos = pos;
    let filler = stop.first().copied().unwrap_or(0);
    // The row of `out` each batch row decodes; finished rows leave the batch once a
    // quarter of it has finished (their cache rows would cost as much as live ones).
    let mut active: Vec<usize> = (0..rows).collect();
    for _ in 0..cfg.max_new_tokens {
        let scaled = (last.to_dtype(DType::F32)? / cfg.temperature)?;
        let logp: Vec<Vec<f32>> = candle_nn::ops::log_softmax(&scaled, D::Minus1)?.to_vec2()?;
        let mut next = Vec::with_capacity(active.len());
        for (b, &i) in active.iter().enumerate() {
            let r = &mut out[i];
            if r.stopped || ended[i] {
                next.push(filler);
                continue;
            }
            let Some(t) = pick_token(row_rules[i].as_mut(), &logp[b], d, &mut rngs[i]) else {
                ended[i] = true;
                next.push(filler);
                continue;
            };
            r.ids.push(t);
            r.logps.push(logp[b][t as usize]);
            if stop.contains(&t) {
                r.stopped = true;
            }
            next.push(t);
        }
        let live: Vec<usize> = (0..active.len())
            .filter(|&b| !(out[active[b]].stopped || ended[active[b]]))
            .collect();
        if live.is_empty() || pos + 1 > max_pos {
            break;
        }
        if live.len() * 4 <= active.len() * 3 {
            cache.retain_rows(&live)?;
            next = live.iter().map(|&b| next[b]).collect();
            row_mask = keep_rows(row_mask, &live);
            active = live.iter().map(|&b| active[b]).collect();
        }
        let input = Tensor::from_vec(next, (active.len(), 1), dev)?;
        let km = if padded {
            for m in row_mask.iter_mut() {
                m.push(0.0);
            }
            Some(mask_tensor(&row_mask, pos + 1)?)
        } else {
            None
        };
        let h = step(&input, pos, &mut cache, km.as_ref())?;
        pos += 1;
        last = decoder.logits(&h)?.squeeze(1)?;
    }
    Ok(in_groups(out, g, n))
}

/// The rows at `live`, in order.
fn keep_rows<T>(rows: Vec<T>, live: &[usize]) -> Vec<T> {
    let mut rows: Vec<Option<T>> = rows.into_iter().map(Some).collect();
    live.iter().filter_map(|&b| rows[b].take()).collect()
}

/// The rollouts as `g` groups of `n`, in order.
fn in_groups(out: Vec<Rollout>, g: usize, n: usize) -> Vec<Vec<Rollout>> {
    let mut it = out.into_iter();
    (0..g).map(|_| it.by_ref().take(n).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::rl::seqs::{TrainSeq, row, token_logps};

    fn model() -> Decoder {
        crate::train::rl::test_model(40, 7, 10.0, false)
    }

    /// Plain sampling at temperature 1 (no nucleus).
    fn at_one(max_new_tokens: usize) -> RolloutConfig {
        RolloutConfig {
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens,
        }
    }

    /// The rollout's recorded log-probs equal a full unpadded forward's at T = 1.
    fn assert_logps_are_the_models(m: &Decoder, prompt: &[u32], r: &Rollout) {
        let s = TrainSeq::rl(prompt, &r.ids);
        let lp = token_logps(m, &[&s], 1.0, false).unwrap();
        let full = row(&lp.logp, 0, r.ids.len()).unwrap();
        for (a, b) in r.logps.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "{:?} vs {full:?}", r.logps);
        }
    }

    #[test]
    fn batched_left_padded_sampling_matches_one_group_at_a_time_and_full_scoring() {
        let m = model();
        let cfg = at_one(6);
        let (p1, p2): (&[u32], &[u32]) = (&[1, 2, 3, 4, 5, 6], &[7, 8]);
        let stop = [39u32];
        let free = GroupDecoding::default();
        let both = sample_groups(&m, &[p1, p2], 3, &stop, &cfg, &[11, 12], free).unwrap();
        let one = sample_group(&m, p1, 3, &stop, &cfg, 11).unwrap();
        let two = sample_group(&m, p2, 3, &stop, &cfg, 12).unwrap();
        let ids = |g: &[Rollout]| g.iter().map(|r| r.ids.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&both[0]), ids(&one));
        assert_eq!(ids(&both[1]), ids(&two));
        // Sampling-time log-probs equal an unpadded full forward's.
        for (prompt, group) in [(p1, &both[0]), (p2, &both[1])] {
            group
                .iter()
                .for_each(|r| assert_logps_are_the_models(&m, prompt, r));
        }
    }

    /// Prompts that continue an encoded prefix draw exactly what they draw encoded
    /// whole, with the model's log-probabilities, whether they are of one length or
    /// not (then each is encoded after its own copy and its keys turned by its
    /// padding); where a prompt does not continue the prefix, it is not used and
    /// nothing changes.
    #[test]
    fn sampling_after_a_shared_prefix_draws_what_whole_prompts_draw() {
        let m = model();
        let cfg = at_one(6);
        let stop = [39u32];
        let (p1, p2): (&[u32], &[u32]) = (&[1, 2, 3, 4, 5, 6, 7], &[1, 2, 3, 4, 9, 8, 7]);
        let short: &[u32] = &[1, 2, 3, 4, 9];
        let mid: &[u32] = &[1, 2, 3, 4, 6, 5];
        let prefix = PrefixCache::encode(&m, &[1, 2, 3, 4], 8).unwrap();
        let with_prefix = GroupDecoding {
            rules: None,
            prefix: Some(&prefix),
            banned: &[],
        };
        let ids = |g: &[Vec<Rollout>]| -> Vec<Vec<u32>> {
            g.iter().flatten().map(|r| r.ids.clone()).collect()
        };
        for prompts in [
            &[p1, p2][..],
            &[p1][..],
            &[short][..],
            &[p2, short][..],
            &[short, p1, mid][..],
        ] {
            let seeds: Vec<u64> = (0..prompts.len() as u64).map(|i| 40 + i).collect();
            let plain = sample_groups(
                &m,
                prompts,
                3,
                &stop,
                &cfg,
                &seeds,
                GroupDecoding::default(),
            )
            .unwrap();
            let cached = sample_groups(&m, prompts, 3, &stop, &cfg, &seeds, with_prefix).unwrap();
            assert_eq!(ids(&cached), ids(&plain));
            for (prompt, group) in prompts.iter().zip(&cached) {
                group
                    .iter()
                    .for_each(|r| assert_logps_are_the_models(&m, prompt, r));
            }
        }
        // The prefix is reusable (its copies are private) and skipped where a prompt
        // does not continue it.
        let p3: &[u32] = &[5, 2, 3, 4, 9];
        let plain = sample_groups(
            &m,
            &[p1, p3],
            2,
            &stop,
            &cfg,
            &[1, 2],
            GroupDecoding::default(),
        )
        .unwrap();
        let cached = sample_groups(&m, &[p1, p3], 2, &stop, &cfg, &[1, 2], with_prefix).unwrap();
        assert_eq!(ids(&cached), ids(&plain));
    }

    /// Grounded rollouts are whole values of their prompt's schema, each row under
    /// its own copy of the rule, and still carry the model's own log-probabilities;
    /// the same draws without the rule are not all values.
    #[test]
    fn grounded_rollouts_are_accepted_values_with_the_models_log_probs() {
        use crate::model::constrain::Schema;
        let m = model();
        let cfg = at_one(12);
        // Token k is one byte of this alphabet; 39 is the stop token.
        let alphabet = b"\"abcdefghijklmnopqrstuvwxyz{}:,0123456789";
        let token_bytes: Vec<Option<Vec<u8>>> = (0..40)
            .map(|k| (k < 39).then(|| vec![alphabet[k]]))
            .collect();
        let text = |r: &Rollout| {
            String::from_utf8(r.text_ids().iter().map(|&t| alphabet[t as usize]).collect()).unwrap()
        };
        let schemas = [
            Schema::compile(&serde_json::json!({"enum": ["ab", "cd"]})).unwrap(),
            Schema::compile(&serde_json::json!({"enum": [7, 12]})).unwrap(),
        ];
        let rules: Vec<Constraint<'_>> = schemas
            .iter()
            .map(|s| Constraint {
                matcher: s.matcher(),
                quotes: None,
                token_bytes: &token_bytes,
            })
            .collect();
        let (p1, p2): (&[u32], &[u32]) = (&[1, 2, 3], &[4, 5, 6, 7]);
        let stop = [39u32];
        let seeds = [5, 6];
        let with_rules = GroupDecoding {
            rules: Some(&rules),
            prefix: None,
            banned: &[],
        };
        let grounded = sample_groups(&m, &[p1, p2], 8, &stop, &cfg, &seeds, with_rules).unwrap();
        for ((prompt, group), schema) in [p1, p2].iter().zip(&grounded).zip(&schemas) {
            for r in group {
                assert!(r.stopped, "{:?}", r.ids);
                assert!(schema.accepts(&text(r)), "{}", text(r));
                assert_logps_are_the_models(&m, prompt, r);
            }
        }
        let free = sample_groups(
            &m,
            &[p1, p2],
            8,
            &stop,
            &cfg,
            &seeds,
            GroupDecoding::default(),
        )
        .unwrap();
        let accepted = free
            .iter()
            .zip(&schemas)
            .flat_map(|(g, s)| g.iter().map(move |r| r.stopped && s.accepts(&text(r))))
            .filter(|&a| a)
            .count();
        assert!(accepted < 16, "free sampling happened to match the rule");
        // A prompt count the rules do not match is refused.
        assert!(sample_groups(&m, &[p1], 2, &stop, &cfg, &[1], with_rules).is_err());
    }

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
