//! The SFT loss: negative log-likelihood of a micro-batch's assistant tokens (and of
//! its other tokens at the prompt weight), the LM head applied only where there is a
//! loss. The samples' common prefix (the system prompt every web-agent sample starts
//! with) is encoded once per micro-batch; gradients through it are the sum over the
//! samples, as with separate copies. Each sample's own tokens then run at their own
//! length, not padded to the longest. Under adapter dropout the prefix's one pass draws
//! one mask for every row (separate copies would draw one each). In the SmolLM2
//! recipe's SFT samples the prefix is 278 of a sample's 612 tokens on average.

use crate::model::chat_template::Encoded;
use crate::model::prefix::shared_prefix_len;
use crate::model::{Decoder, KvCache, at_least_f32, fused};
use anyhow::Result;
use candle_core::{D, DType, Tensor};

/// Loss terms of one micro-batch (see [`micro_batch_nll`]).
pub struct BatchNll {
    /// Summed negative log-likelihood, assistant tokens at weight 1 and the other
    /// tokens at the prompt weight (a scalar tensor, in the graph).
    pub weighted: Tensor,
    /// Summed NLL of the assistant tokens alone.
    pub assistant_nll: f64,
    /// Summed NLL of the other tokens (0 when their weight is 0: not computed).
    pub prompt_nll: f64,
    /// Assistant tokens with a loss.
    pub assistant_tokens: usize,
    /// Other tokens with a loss (0 when their weight is 0).
    pub prompt_tokens: usize,
    /// All tokens of the batch.
    pub tokens: usize,
}

/// Loss terms of one micro-batch: the negative log-likelihood of its assistant tokens
/// and, when `prompt_weight` > 0, of every other token after the first (system and user
/// text, chat markup) at that weight.
pub fn micro_batch_nll(
    model: &Decoder,
    batch: &[&Encoded],
    pad: u32,
    prompt_weight: f64,
) -> Result<BatchNll> {
    nll_sharing(model, batch, pad, prompt_weight, true)
}

/// Shorter common prefixes are not worth a pass of their own.
const MIN_SHARED: usize = 8;

/// [`micro_batch_nll`], encoding the common prefix once when `share`.
fn nll_sharing(
    model: &Decoder,
    batch: &[&Encoded],
    pad: u32,
    prompt_weight: f64,
    share: bool,
) -> Result<BatchNll> {
    let dev = model.device();
    let rows = LossRows::of(batch, pad, prompt_weight)?;
    let (b, w) = (batch.len(), rows.len - 1);
    let ids: Vec<&[u32]> = batch.iter().map(|e| e.ids.as_slice()).collect();
    let shared = if share && b > 1 {
        shared_prefix_len(&ids)
    } else {
        0
    };
    let hidden = if shared >= MIN_SHARED {
        prefix_then_rows(model, &ids, shared, w)?
    } else {
        let inp = Tensor::from_vec(rows.inputs.clone(), (b, w), dev)?;
        model.forward_hidden(&inp, 0, None)?
    };
    rows.nll(&hidden, prompt_weight, |h| Ok(model.logits(h)?))
}

/// Final hidden states `(rows, w, hidden)` of samples whose first `shared` inputs are
/// common: the prefix is encoded once, then each row's own inputs on a copy of the
/// prefix's cache, unpadded (a padded row's pad positions hold zeros: no loss lies
/// there). Under adapter dropout each row's pass draws masks of its own; the prefix's
/// one mask serves every row, as its one pass does.
fn prefix_then_rows(model: &Decoder, ids: &[&[u32]], shared: usize, w: usize) -> Result<Tensor> {
    let dev = model.device();
    let mut cache = KvCache::new();
    let prefix = Tensor::new(&ids[0][..shared], dev)?.unsqueeze(0)?;
    let hp = model.forward_hidden(&prefix, 0, Some(&mut cache))?;
    let (hidden, dtype) = (hp.dim(2)?, hp.dtype());
    let mut rows = Vec::with_capacity(ids.len());
    for (i, r) in ids.iter().enumerate() {
        let own = &r[shared..r.len() - 1];
        let mut parts = vec![hp.clone()];
        if !own.is_empty() {
            let own = Tensor::new(own, dev)?.unsqueeze(0)?;
            let mut cache = cache.clone();
            parts.push(model.dropout_key().salted(1 + i as u64, || {
                model.forward_hidden(&own, shared, Some(&mut cache))
            })?);
        }
        let pad = w - (r.len() - 1);
        if pad > 0 {
            parts.push(Tensor::zeros((1, pad, hidden), dtype, dev)?);
        }
        rows.push(Tensor::cat(&parts, 1)?);
    }
    Ok(Tensor::cat(&rows, 0)?)
}

/// The inputs of a padded micro-batch and where its loss lies.
pub struct LossRows {
    /// Longest sequence of the batch.
    pub len: usize,
    /// `batch · (len − 1)` input ids, padded.
    pub inputs: Vec<u32>,
    /// Flat input positions with a loss, their targets and whether each is an
    /// assistant token.
    rows: Vec<u32>,
    targets: Vec<u32>,
    assistant: Vec<bool>,
    tokens: usize,
}

impl LossRows {
    pub fn of(batch: &[&Encoded], pad: u32, prompt_weight: f64) -> Result<Self> {
        let len = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0);
        anyhow::ensure!(len >= 2, "samples need at least two tokens");
        let (mut inputs, mut rows, mut targets, mut assistant) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut tokens = 0;
        for e in batch {
            tokens += e.ids.len();
            for i in 0..len - 1 {
                inputs.push(e.ids.get(i).copied().unwrap_or(pad));
                let Some(&t) = e.ids.get(i + 1) else { continue };
                let is_assistant = e.mask.get(i + 1).copied().unwrap_or(false);
                if is_assistant || prompt_weight > 0.0 {
                    rows.push(inputs.len() as u32 - 1);
                    targets.push(t);
                    assistant.push(is_assistant);
                }
            }
        }
        Ok(LossRows {
            len,
            inputs,
            rows,
            targets,
            assistant,
            tokens,
        })
    }

    /// The loss terms from the final hidden states `(batch, len − 1, hidden)`, the LM
    /// head `logits` applied only where there is a loss.
    pub fn nll(
        self,
        hidden: &Tensor,
        prompt_weight: f64,
        logits: impl Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<BatchNll> {
        let dev = hidden.device();
        let n = self.inputs.len();
        let hidden = hidden.reshape((n, hidden.dim(D::Minus1)?))?;
        let assistant = self.assistant;
        let assistant_tokens = assistant.iter().filter(|&&a| a).count();
        let prompt_tokens = assistant.len() - assistant_tokens;
        if self.rows.is_empty() {
            return Ok(BatchNll {
                weighted: (hidden.sum_all()? * 0.0)?,
                assistant_nll: 0.0,
                prompt_nll: 0.0,
                assistant_tokens,
                prompt_tokens,
                tokens: self.tokens,
            });
        }
        // The LM head and softmax run only where there is a loss: with assistant tokens
        // alone, a small part of a web-agent sample (long observation, short action).
        let idx = Tensor::from_vec(self.rows, assistant.len(), dev)?;
        // Log-probabilities in f32 at least (bf16 logits lose too much).
        let logits = at_least_f32(&logits(&hidden.index_select(&idx, 0)?)?)?;
        let logp = fused::target_log_probs(&logits, &self.targets)?;
        let per_row: Vec<f64> = logp
            .to_dtype(DType::F64)?
            .to_vec1::<f64>()?
            .into_iter()
            .map(|x| -x)
            .collect();
        let sum_where = |want: bool| -> f64 {
            per_row
                .iter()
                .zip(&assistant)
                .filter(|(_, a)| **a == want)
                .map(|(x, _)| x)
                .sum()
        };
        let (assistant_nll, prompt_nll) = (sum_where(true), sum_where(false));
        let weighted = if prompt_tokens == 0 {
            logp.sum_all()?.neg()?
        } else {
            let w: Vec<f32> = assistant
                .iter()
                .map(|&a| if a { 1.0 } else { prompt_weight as f32 })
                .collect();
            let w = Tensor::from_vec(w, assistant.len(), dev)?.to_dtype(logp.dtype())?;
            (logp * w)?.sum_all()?.neg()?
        };
        Ok(BatchNll {
            weighted,
            assistant_nll,
            prompt_nll,
            assistant_tokens,
            prompt_tokens,
            tokens: self.tokens,
        })
    }
}

impl BatchNll {
    /// The terms of two micro-batches together.
    pub fn combined(self, other: BatchNll) -> Result<BatchNll> {
        Ok(BatchNll {
            weighted: (self.weighted + other.weighted)?,
            assistant_nll: self.assistant_nll + other.assistant_nll,
            prompt_nll: self.prompt_nll + other.prompt_nll,
            assistant_tokens: self.assistant_tokens + other.assistant_tokens,
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            tokens: self.tokens + other.tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ids: Vec<u32>, answer_from: usize) -> Encoded {
        let mask = (0..ids.len()).map(|i| i >= answer_from).collect();
        Encoded { ids, mask }
    }

    /// Under adapter dropout the common prefix is still encoded once, its masks drawn
    /// by key: the same key gives the same loss (a resumed run draws what it drew),
    /// another key or no dropout another one, and the trainer's key is left as it was.
    #[test]
    fn adapter_dropout_keeps_the_prefix_shared_and_draws_by_key() {
        let mut m = crate::train::rl::test_model(50, 7, 3.0, false);
        let cfg = crate::model::LoraConfig {
            r: 4,
            alpha: 8.0,
            dropout: 0.5,
            ..crate::model::LoraConfig::small()
        };
        m.add_lora(&cfg, 1).unwrap();
        // Non-zero B: the adapters (and so their dropout) change the loss.
        for (name, v) in m.trainable_vars() {
            if name.contains("lora_B") {
                v.set(&(v.as_tensor().ones_like().unwrap() * 0.1).unwrap())
                    .unwrap();
            }
        }
        let prefix: Vec<u32> = (1..=12).collect();
        let with = |tail: &[u32]| prefix.iter().chain(tail).copied().collect::<Vec<_>>();
        let batch = [
            sample(with(&[20, 21, 22, 23, 24]), 14),
            sample(with(&[30, 31]), 13),
        ];
        let refs: Vec<&Encoded> = batch.iter().collect();
        let loss = |key: Option<u64>, share: Option<bool>| {
            m.dropout_key().set(key);
            let nll = match share {
                None => micro_batch_nll(&m, &refs, 0, 0.0),
                Some(s) => nll_sharing(&m, &refs, 0, 0.0, s),
            };
            nll.unwrap().weighted.to_scalar::<f32>().unwrap()
        };
        let off = loss(None, None);
        let a = loss(Some(5), None);
        m.dropout_key().set(Some(5));
        let before = m.dropout_key().get();
        micro_batch_nll(&m, &refs, 0, 0.0).unwrap();
        assert_eq!(m.dropout_key().get(), before);
        assert_eq!(a, loss(Some(5), None));
        assert_ne!(a, off);
        assert_ne!(a, loss(Some(6), None));
        // The shared path, not separate rows (whose masks lie elsewhere).
        assert_eq!(a, loss(Some(5), Some(true)));
        assert_ne!(a, loss(Some(5), Some(false)));
    }

    /// Loss, its terms and every gradient are those of separate full passes when the
    /// micro-batch's common prefix is encoded once (samples of different lengths,
    /// right-padded, one of them the common prefix alone, with and without prompt
    /// loss).
    #[test]
    fn a_shared_prefix_gives_the_loss_and_gradients_of_full_passes() {
        let m = crate::train::rl::test_model(50, 7, 3.0, true);
        let prefix: Vec<u32> = (1..=12).collect();
        let with = |tail: &[u32]| prefix.iter().chain(tail).copied().collect::<Vec<_>>();
        let batch = [
            sample(with(&[20, 21, 22, 23, 24]), 14),
            sample(with(&[30, 31]), 13),
            sample(with(&[20, 21, 40, 41, 42, 43, 44]), 15),
            // The common prefix alone: the shared pass (11 inputs, one short of the
            // shortest row) covers all of this row's inputs, so it has no pass of
            // its own, only padding after the prefix.
            sample(prefix.clone(), 10),
        ];
        let refs: Vec<&Encoded> = batch.iter().collect();
        assert_eq!(
            shared_prefix_len(&batch.iter().map(|e| e.ids.as_slice()).collect::<Vec<_>>()),
            11
        );
        for weight in [0.0, 0.3] {
            let run = |share: bool| {
                let nll = nll_sharing(&m, &refs, 0, weight, share).unwrap();
                let g = nll.weighted.backward().unwrap();
                let grads: Vec<Vec<f32>> = m
                    .trainable_vars()
                    .iter()
                    .map(|(_, v)| {
                        g.get(v.as_tensor())
                            .unwrap()
                            .flatten_all()
                            .unwrap()
                            .to_vec1()
                            .unwrap()
                    })
                    .collect();
                let loss = nll.weighted.to_scalar::<f32>().unwrap();
                (
                    loss,
                    nll.assistant_nll,
                    nll.prompt_nll,
                    nll.assistant_tokens,
                    nll.prompt_tokens,
                    grads,
                )
            };
            let (a, b) = (run(true), run(false));
            assert!(
                (a.0 - b.0).abs() <= 1e-4 * b.0.abs(),
                "loss {} vs {}",
                a.0,
                b.0
            );
            assert!((a.1 - b.1).abs() <= 1e-4 * b.1.abs());
            assert!((a.2 - b.2).abs() <= 1e-4 * (1.0 + b.2.abs()));
            assert_eq!((a.3, a.4), (b.3, b.4));
            for (x, y) in a.5.iter().zip(&b.5) {
                for (p, q) in x.iter().zip(y) {
                    assert!((p - q).abs() <= 1e-4 * (1.0 + q.abs()), "{p} vs {q}");
                }
            }
        }
    }
}
