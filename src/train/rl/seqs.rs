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
use crate::model::Qwen3;
use anyhow::Result;
use candle_core::{D, DType, Tensor};
use tokenizers::Tokenizer;

/// A sequence to score: `ids[..resp_start]` is context, `ids[resp_start..]` the
/// response whose tokens get log-probabilities; `mask[k]` (1/0) says whether response
/// token `k` enters the loss.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSeq {
    pub ids: Vec<u32>,
    pub resp_start: usize,
    pub mask: Vec<f32>,
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
        }
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

/// Log-probabilities of the response tokens of `seqs` under `model` with logits
/// divided by `temperature`. Only the response positions go through the LM head.
pub fn token_logps(
    model: &Qwen3,
    seqs: &[&TrainSeq],
    temperature: f64,
    with_entropy: bool,
) -> Result<TokenLogps> {
    anyhow::ensure!(!seqs.is_empty(), "no sequences to score");
    let dev = model.device();
    let b = seqs.len();
    anyhow::ensure!(
        seqs.iter().all(|s| s.resp_start >= 1 && s.resp_len() > 0),
        "every scored sequence needs context and a response"
    );
    let len = seqs.iter().map(|s| s.ids.len()).max().unwrap_or(0) - 1;
    let r = seqs.iter().map(|s| s.resp_len()).max().unwrap_or(0);
    let mut inp = Vec::with_capacity(b * len);
    let mut rows = Vec::with_capacity(b * r);
    let mut tgt = Vec::with_capacity(b * r);
    let mut msk = Vec::with_capacity(b * r);
    for (i, s) in seqs.iter().enumerate() {
        for j in 0..len {
            inp.push(s.ids.get(j).copied().unwrap_or(0));
        }
        for k in 0..r {
            if k < s.resp_len() {
                rows.push((i * len + s.resp_start - 1 + k) as u32);
                tgt.push(s.ids[s.resp_start + k]);
                msk.push(s.mask.get(k).copied().unwrap_or(0.0));
            } else {
                rows.push((i * len) as u32);
                tgt.push(0);
                msk.push(0.0);
            }
        }
    }
    let inp = Tensor::from_vec(inp, (b, len), dev)?;
    let hidden = model.forward_hidden(&inp, 0, None)?;
    let h = hidden.dim(2)?;
    let picked = hidden
        .reshape((b * len, h))?
        .index_select(&Tensor::from_vec(rows, b * r, dev)?, 0)?;
    let logits = model.logits(&picked)?;
    let logits = match logits.dtype() {
        DType::F64 => logits,
        _ => logits.to_dtype(DType::F32)?,
    };
    let lsm = candle_nn::ops::log_softmax(&(logits / temperature)?, D::Minus1)?;
    let tgt = Tensor::from_vec(tgt, (b * r, 1), dev)?;
    let logp = lsm.gather(&tgt, D::Minus1)?.reshape((b, r))?;
    let entropy = if with_entropy {
        let d = lsm.detach();
        Some((d.exp()? * &d)?.sum(D::Minus1)?.neg()?.reshape((b, r))?)
    } else {
        None
    };
    let mask = Tensor::from_vec(msk, (b, r), dev)?.to_dtype(logp.dtype())?;
    Ok(TokenLogps {
        logp,
        mask,
        entropy,
    })
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
