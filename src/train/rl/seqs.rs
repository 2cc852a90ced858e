//! Training sequences (prompt + response with a per-token loss mask) and their
//! batched per-token log-probabilities.
//!
//! - An RL sequence is the prompt and a sampled response exactly as generated (token
//!   ids, stop token included); every response token counts.
//! - A salvage sequence is the prompt, the rollout's own reasoning and the
//!   ground-truth action ([`crate::action::render::splice_actions`]), re-tokenized;
//!   only the tokens of the action span count. A token straddling the span's edge
//!   (BPE may merge `": [` with the bracket) counts, since it carries action bytes.

use crate::action::Action;
use crate::action::render::splice_actions;
use crate::model::Decoder;
use crate::model::prefix::shared_prefix_len;
use crate::model::vl::prompt::Screenshot;
use crate::model::vl::{Qwen3Vl, VlCache};
use anyhow::Result;
use candle_core::{D, DType, Tensor};
use std::sync::Arc;
use tokenizers::Tokenizer;

/// The screenshot a sequence's context shows (a Qwen3-VL policy's prompt): two are
/// equal when they are the same loaded screenshot.
#[derive(Debug, Clone)]
pub struct SeenImage(pub Arc<Screenshot>);

impl PartialEq for SeenImage {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A sequence to score: `ids[..resp_start]` is context, `ids[resp_start..]` the
/// response whose tokens get log-probabilities; `mask[k]` (1/0) says whether response
/// token `k` enters the loss.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSeq {
    pub ids: Vec<u32>,
    pub resp_start: usize,
    pub mask: Vec<f32>,
    /// The screenshot whose image placeholders the context holds, if any.
    pub image: Option<SeenImage>,
}

impl TrainSeq {
    /// Prompt + response, every response token in the loss.
    pub fn rl(prompt: &[u32], response: &[u32]) -> Self {
        let mut ids = prompt.to_vec();
        ids.extend_from_slice(response);
        TrainSeq {
            ids,
            resp_start: prompt.len(),
            mask: vec![1.0; response.len()],
            image: None,
        }
    }

    /// The sequence with its context showing `image`.
    pub fn seeing(mut self, image: Option<SeenImage>) -> Self {
        self.image = image;
        self
    }

    /// Response length in tokens.
    pub fn resp_len(&self) -> usize {
        self.ids.len() - self.resp_start
    }

    /// Tokens in the loss.
    pub fn masked(&self) -> usize {
        self.mask.iter().filter(|&&m| m > 0.0).count()
    }
}

/// Prompt + `response` with the action replaced by `targets`; the mask covers the
/// tokens of the new action span only. Also returns the spliced text.
pub fn salvage(
    tok: &Tokenizer,
    prompt: &[u32],
    response: &str,
    targets: &[Action],
) -> Result<(TrainSeq, String)> {
    let sp = splice_actions(response, targets);
    Ok((span_seq(tok, prompt, &sp.text, &sp.action_span)?, sp.text))
}

/// Prompt + `text` (re-tokenized) with the mask on the tokens overlapping `span`
/// (byte offsets into `text`).
pub fn span_seq(
    tok: &Tokenizer,
    prompt: &[u32],
    text: &str,
    span: &std::ops::Range<usize>,
) -> Result<TrainSeq> {
    let enc = tok
        .encode(text, false)
        .map_err(|e| anyhow::anyhow!("tokenizing a response: {e}"))?;
    let mask: Vec<f32> = enc
        .get_offsets()
        .iter()
        .map(|&(s, e)| f32::from(u8::from(e > s && s < span.end && e > span.start)))
        .collect();
    let mut ids = prompt.to_vec();
    ids.extend_from_slice(enc.get_ids());
    Ok(TrainSeq {
        ids,
        resp_start: prompt.len(),
        mask,
        image: None,
    })
}

/// Per-token log-probabilities of a batch of sequences.
pub struct TokenLogps {
    /// `(batch, max_resp_len)`: log p(response token k) at the temperature.
    pub logp: Tensor,
    /// `(batch, max_resp_len)`, f32: each sequence's loss mask, 0 on padding.
    pub mask: Tensor,
    /// Detached per-token entropy of the policy, when asked for.
    pub entropy: Option<Tensor>,
}

/// What scores sequences: a decoder, and the Qwen3-VL model around it when the
/// policy sees (it encodes the contexts that show a screenshot).
#[derive(Clone, Copy)]
pub struct Scorer<'a> {
    decoder: &'a Decoder,
    vl: Option<&'a Qwen3Vl>,
}

impl<'a> From<&'a Decoder> for Scorer<'a> {
    fn from(decoder: &'a Decoder) -> Self {
        Scorer { decoder, vl: None }
    }
}

impl<'a> From<&'a Qwen3Vl> for Scorer<'a> {
    fn from(vl: &'a Qwen3Vl) -> Self {
        Scorer {
            decoder: vl.text().decoder(),
            vl: Some(vl),
        }
    }
}

/// Log-probabilities of the response tokens of `seqs` under `model` (a decoder, or a
/// Qwen3-VL model for sequences that show a screenshot) with logits divided by
/// `temperature`.
///
/// Consecutive sequences with the same context (the rollouts of one group) share
/// one forward pass of that context: it is encoded once with batch 1, its KV cache
/// repeated for the group, and only the responses run batched after it. The
/// contexts' common prefix (the system prompt) is encoded once for all of them.
/// Gradients flow through shared positions as through separate copies (the cache
/// tensors are part of the graph). Only the response positions go through the LM
/// head.
pub fn token_logps<'a>(
    model: impl Into<Scorer<'a>>,
    seqs: &[&TrainSeq],
    temperature: f64,
    with_entropy: bool,
) -> Result<TokenLogps> {
    anyhow::ensure!(!seqs.is_empty(), "no sequences to score");
    anyhow::ensure!(
        seqs.iter().all(|s| s.resp_start >= 1 && s.resp_len() > 0),
        "every scored sequence needs context and a response"
    );
    let scorer: Scorer<'a> = model.into();
    let model = scorer.decoder;
    let dev = model.device();
    let width = seqs.iter().map(|s| s.resp_len()).max().unwrap_or(0);
    let runs = context_runs(seqs);
    // With several text contexts, their common prefix (each keeps a token of its own).
    let shared = match runs.len() {
        _ if seqs.iter().any(|s| s.image.is_some()) => None,
        1 => None,
        _ => {
            let ctxs: Vec<&[u32]> = runs.iter().map(|(c, _)| *c).collect();
            let len = shared_prefix_len(&ctxs);
            (len > 0)
                .then(|| -> Result<_> {
                    let mut cache = crate::model::KvCache::new();
                    let prefix = Tensor::new(&ctxs[0][..len], dev)?.unsqueeze(0)?;
                    model.forward_hidden(&prefix, 0, Some(&mut cache))?;
                    Ok(cache)
                })
                .transpose()?
        }
    };
    let mut parts = Vec::with_capacity(runs.len());
    for (ctx, range) in runs {
        let group = &seqs[range];
        parts.push(match &group[0].image {
            None => group_hidden(model, ctx, shared.as_ref(), group, width)?,
            Some(image) => {
                let vl = scorer.vl.ok_or_else(|| {
                    anyhow::anyhow!("a sequence shows a screenshot, but the model does not see")
                })?;
                group_hidden_seeing(vl, ctx, image, group, width)?
            }
        });
    }
    let hidden = Tensor::cat(&parts, 0)?; // (batch, width, hidden)
    let (b, h) = (seqs.len(), hidden.dim(2)?);
    let (tgt, msk) = targets_and_mask(seqs, width);
    let logits = model.logits(&hidden.reshape((b * width, h))?)?;
    let logits = crate::model::at_least_f32(&logits)?;
    let scaled = (logits / temperature)?;
    let logp = crate::model::fused::target_log_probs(&scaled, &tgt)?.reshape((b, width))?;
    let entropy = if with_entropy {
        let d = candle_nn::ops::log_softmax(&scaled.detach(), D::Minus1)?;
        Some(
            (d.exp()? * &d)?
                .sum(D::Minus1)?
                .neg()?
                .reshape((b, width))?,
        )
    } else {
        None
    };
    let mask = Tensor::from_vec(msk, (b, width), dev)?.to_dtype(logp.dtype())?;
    Ok(TokenLogps {
        logp,
        mask,
        entropy,
    })
}

/// The sequences in runs of one context (and image): `(context, range of seqs)`.
fn context_runs<'s>(seqs: &[&'s TrainSeq]) -> Vec<(&'s [u32], std::ops::Range<usize>)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let ctx = &seqs[i].ids[..seqs[i].resp_start];
        let mut j = i + 1;
        while j < seqs.len()
            && seqs[j].ids[..seqs[j].resp_start] == *ctx
            && seqs[j].image == seqs[i].image
        {
            j += 1;
        }
        runs.push((ctx, i..j));
        i = j;
    }
    runs
}

/// Each sequence's response tokens and their loss mask, padded to `width` (padding:
/// token 0, mask 0), row after row.
fn targets_and_mask(seqs: &[&TrainSeq], width: usize) -> (Vec<u32>, Vec<f32>) {
    let mut tgt = Vec::with_capacity(seqs.len() * width);
    let mut msk = Vec::with_capacity(seqs.len() * width);
    for s in seqs {
        for k in 0..width {
            if k < s.resp_len() {
                tgt.push(s.ids[s.resp_start + k]);
                msk.push(s.mask.get(k).copied().unwrap_or(0.0));
            } else {
                tgt.push(0);
                msk.push(0.0);
            }
        }
    }
    (tgt, msk)
}

/// Hidden states `(m, width, hidden)` that predict the response tokens of `group`
/// (all with context `ctx`, whose first positions `shared` may hold already):
/// position k holds the state after response token k − 1 (k = 0: after the
/// context). Positions past a response's end are padding.
fn group_hidden(
    model: &Decoder,
    ctx: &[u32],
    shared: Option<&crate::model::KvCache>,
    group: &[&TrainSeq],
    width: usize,
) -> Result<Tensor> {
    let dev = model.device();
    let m = group.len();
    let mut cache = shared.cloned().unwrap_or_default();
    let start = cache.len();
    let prefix = Tensor::new(&ctx[start..], dev)?.unsqueeze(0)?;
    let hp = model.forward_hidden(&prefix, start, Some(&mut cache))?;
    with_responses(&hp, group, width, |inp| {
        let mut cache = cache.repeat_batch(m)?;
        Ok(model.forward_hidden(inp, ctx.len(), Some(&mut cache))?)
    })
}

/// [`group_hidden`] for contexts that show `image`: the Qwen3-VL model encodes the
/// context with it (differentiably), and the responses continue after it.
fn group_hidden_seeing(
    vl: &Qwen3Vl,
    ctx: &[u32],
    image: &SeenImage,
    group: &[&TrainSeq],
    width: usize,
) -> Result<Tensor> {
    let mut cache = VlCache::new();
    let hp = vl.forward_hidden(ctx, Some(image.0.images()), Some(&mut cache))?;
    with_responses(&hp, group, width, |inp| {
        let mut cache = cache.repeat_batch(group.len())?;
        Ok(vl.continue_hidden(inp, &mut cache)?)
    })
}

/// The hidden states of `group` given its context's `(1, l, hidden)`: the context's
/// last state for every sequence, then `continued` on each sequence's response
/// tokens but the last (`(m, width − 1)`, padded with 0).
fn with_responses(
    context: &Tensor,
    group: &[&TrainSeq],
    width: usize,
    continued: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let (m, l, h) = (group.len(), context.dim(1)?, context.dim(2)?);
    let last = context
        .narrow(1, l - 1, 1)?
        .broadcast_as((m, 1, h))?
        .contiguous()?;
    if width == 1 {
        return Ok(last);
    }
    let mut inp = Vec::with_capacity(m * (width - 1));
    for s in group {
        let resp = &s.ids[s.resp_start..];
        for k in 0..width - 1 {
            inp.push(resp.get(k).copied().unwrap_or(0));
        }
    }
    let inp = Tensor::from_vec(inp, (m, width - 1), context.device())?;
    Ok(Tensor::cat(&[&last, &continued(&inp)?], 1)?)
}

/// Row `i` of a `(batch, tokens)` tensor as numbers (its first `n` entries).
pub fn row(t: &Tensor, i: usize, n: usize) -> Result<Vec<f32>> {
    Ok(t.get(i)?.narrow(0, 0, n)?.to_dtype(DType::F32)?.to_vec1()?)
}

/// Pads per-sequence values to a `(batch, width)` tensor (zeros after each row).
pub fn padded(rows: &[&[f32]], width: usize, like: &Tensor) -> Result<Tensor> {
    let mut v = Vec::with_capacity(rows.len() * width);
    for r in rows {
        v.extend(r.iter().copied().take(width));
        v.extend(std::iter::repeat_n(0.0, width.saturating_sub(r.len())));
    }
    Ok(Tensor::from_vec(v, (rows.len(), width), like.device())?.to_dtype(like.dtype())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, IndexOp};

    fn model() -> Decoder {
        crate::train::rl::test_model(50, 3, 20.0, true)
    }

    /// log p of `ids[k]` for k ≥ start from one plain full forward pass.
    fn reference(m: &Decoder, ids: &[u32], start: usize, t: f64) -> Vec<f32> {
        let x = Tensor::new(ids, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let logits = (m.forward(&x, 0, None).unwrap() / t).unwrap();
        let lsm = candle_nn::ops::log_softmax(&logits, D::Minus1).unwrap();
        (start..ids.len())
            .map(|k| {
                lsm.i((0, k - 1, ids[k] as usize))
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn shared_context_scoring_equals_separate_full_passes() {
        let m = model();
        let a = TrainSeq::rl(&[1, 2, 3, 4], &[5, 6, 7]);
        let b = TrainSeq::rl(&[1, 2, 3, 4], &[8]);
        let c = TrainSeq::rl(&[9, 9], &[10, 11, 12, 13]);
        // Contexts with a common prefix ([1, 2]) and one that is all of it but a token.
        let d = TrainSeq::rl(&[1, 2, 7], &[5, 6]);
        let e = TrainSeq::rl(&[1, 2, 3], &[8, 8, 8, 8]);
        for set in [[&a, &b, &c], [&a, &d, &e]] {
            let out = token_logps(&m, &set, 0.7, true).unwrap();
            assert_eq!(out.logp.dims(), &[3, 4]);
            for (i, s) in set.iter().enumerate() {
                let got = row(&out.logp, i, s.resp_len()).unwrap();
                let want = reference(&m, &s.ids, s.resp_start, 0.7);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() < 1e-4, "seq {i}: {got:?} vs {want:?}");
                }
            }
            let mask: Vec<Vec<f32>> = out.mask.to_vec2().unwrap();
            assert_eq!(mask[1][2..], [0.0, 0.0]);
            // Gradients reach the shared context's parameters (the embedding here).
            let loss = (out.logp * out.mask).unwrap().sum_all().unwrap();
            let g = loss.backward().unwrap();
            assert!(
                m.trainable_vars()
                    .iter()
                    .all(|(_, v)| g.get(v.as_tensor()).is_some())
            );
        }
    }

    /// The gradient through a prefix shared by several contexts is the sum over
    /// separate copies: scoring together equals scoring each sequence alone.
    #[test]
    fn gradients_through_a_shared_prefix_equal_separate_passes() {
        let m = model();
        let a = TrainSeq::rl(&[1, 2, 3, 4], &[5, 6]);
        let b = TrainSeq::rl(&[1, 2, 3, 9], &[7]);
        let grads = |sets: &[&[&TrainSeq]]| -> Vec<Tensor> {
            let mut total: Option<Tensor> = None;
            for set in sets {
                let out = token_logps(&m, set, 1.0, false).unwrap();
                let loss = (out.logp * out.mask).unwrap().sum_all().unwrap();
                total = Some(match total {
                    Some(t) => (t + loss).unwrap(),
                    None => loss,
                });
            }
            let g = total.unwrap().backward().unwrap();
            m.trainable_vars()
                .iter()
                .map(|(_, v)| g.get(v.as_tensor()).unwrap().clone())
                .collect()
        };
        let together = grads(&[&[&a, &b]]);
        let apart = grads(&[&[&a], &[&b]]);
        for (x, y) in together.iter().zip(&apart) {
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for (p, q) in flat(x).iter().zip(flat(y)) {
                assert!((p - q).abs() <= 1e-4 * (1.0 + q.abs()), "{p} vs {q}");
            }
        }
    }

    #[test]
    fn adapters_off_scores_the_frozen_base_policy() {
        let mut m = model();
        let s = TrainSeq::rl(&[1, 2, 3], &[4, 5]);
        let base = row(&token_logps(&m, &[&s], 1.0, false).unwrap().logp, 0, 2).unwrap();
        let cfg = crate::model::LoraConfig {
            r: 4,
            alpha: 8.0,
            dropout: 0.0,
            target_modules: vec!["q_proj".into(), "v_proj".into(), "o_proj".into()],
        };
        m.add_lora(&cfg, 1).unwrap();
        // Non-zero B: the adapter now changes the policy.
        for (name, v) in m.trainable_vars() {
            if name.contains("lora_B") {
                v.set(&v.as_tensor().ones_like().unwrap()).unwrap();
            }
        }
        let on = row(&token_logps(&m, &[&s], 1.0, false).unwrap().logp, 0, 2).unwrap();
        m.set_adapters_enabled(false);
        let off = row(&token_logps(&m, &[&s], 1.0, false).unwrap().logp, 0, 2).unwrap();
        m.set_adapters_enabled(true);
        let again = row(&token_logps(&m, &[&s], 1.0, false).unwrap().logp, 0, 2).unwrap();
        assert_eq!(off, base);
        assert_eq!(again, on);
        assert!(on.iter().zip(&base).any(|(a, b)| (a - b).abs() > 1e-4));
    }

    #[test]
    fn span_mask_covers_tokens_overlapping_the_span() {
        let tok =
            crate::model::tokenizer::train_bpe(["abc def ghi"].iter().cycle().take(10), 300, 2)
                .unwrap();
        let s = span_seq(&tok, &[0], "abc def ghi", &(4..7)).unwrap();
        let masked: Vec<u32> = s.ids[1..]
            .iter()
            .zip(&s.mask)
            .filter(|(_, m)| **m > 0.0)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(tok.decode(&masked, false).unwrap().trim(), "def");
    }
}
