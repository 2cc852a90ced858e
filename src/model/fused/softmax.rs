//! Masked, scaled softmax of attention scores.

use super::{f32_slice, fusable, par_rows, with_f32};
use candle_core::{CpuStorage, CustomOp1, D, DType, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// Which keys each query row of an attention score tensor may see.
#[derive(Debug, Clone)]
pub struct AttentionMask {
    /// Causal with this many cached positions before the first query (query `i`
    /// sees keys `0..=past + i`); `None`: every key.
    pub causal_past: Option<usize>,
    /// Additive per-key values `(batch, keys)`, row-major (e.g. a large negative value
    /// on left padding).
    pub key_bias: Option<Arc<Vec<f32>>>,
    /// Rows that hold the same first keys (read once by the decode kernel).
    pub shared: Option<super::SharedRows>,
}

impl AttentionMask {
    /// How many of `keys` keys (the first ones) query `query` of a row sees.
    pub(super) fn visible_keys(&self, query: usize, keys: usize) -> usize {
        match self.causal_past {
            Some(p) => (p + query + 1).min(keys),
            None => keys,
        }
    }

    /// The additive key values of batch row `batch`, `keys` wide.
    pub(super) fn key_bias_row(&self, batch: usize, keys: usize) -> Option<&[f32]> {
        let kb = self.key_bias.as_ref()?;
        Some(&kb[batch * keys..(batch + 1) * keys])
    }
}

/// `softmax(scale · scores + mask)` over the last dimension of `scores`
/// `(batch, heads, queries, keys)`; masked keys get probability 0. The composite
/// path takes `mask_tensor` instead: the same mask as an additive tensor
/// broadcastable to the scores.
pub fn attention_softmax(
    scores: &Tensor,
    scale: f64,
    mask: &AttentionMask,
    mask_tensor: Option<&Tensor>,
) -> Result<Tensor> {
    if !fusable(scores) {
        let s = (scores * scale)?;
        let s = match mask_tensor {
            Some(m) => s.broadcast_add(m)?,
            None => s,
        };
        return if matches!(s.dtype(), DType::F32 | DType::F64) {
            candle_nn::ops::softmax(&s, D::Minus1)
        } else {
            candle_nn::ops::softmax(&s.to_dtype(DType::F32)?, D::Minus1)?.to_dtype(s.dtype())
        };
    }
    let (b, _, _, keys) = scores.dims4()?;
    if let Some(k) = &mask.key_bias
        && k.len() != b * keys
    {
        candle_core::bail!("attention key mask of {} for {b}×{keys} keys", k.len());
    }
    scores.contiguous()?.apply_op1(MaskedSoftmax {
        scale: scale as f32,
        mask: mask.clone(),
    })
}

struct MaskedSoftmax {
    scale: f32,
    mask: AttentionMask,
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "rmsweb-masked-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, h, q, k) = l.shape().dims4()?;
        let out = softmax_rows(f32_slice(s, l)?, (h, q, k), self.scale, &self.mask);
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let k = res.dim(D::Minus1)?;
        let dx = with_f32([res, grad], |[ys, gs]| {
            Ok(softmax_rows_bwd(ys, gs, k, self.scale))
        })?;
        Ok(Some(Tensor::from_vec(dx, res.shape(), res.device())?))
    }
}

/// Masked softmax of score rows laid out `(batch, heads, queries, keys)`.
pub(super) fn softmax_rows(
    x: &[f32],
    (h, q, k): (usize, usize, usize),
    scale: f32,
    mask: &AttentionMask,
) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    par_rows(&mut out, k, |r, y| {
        let xr = &x[r * k..(r + 1) * k];
        let limit = mask.visible_keys(r % q, k);
        let bias = mask.key_bias_row(r / (h * q), k);
        for j in 0..limit {
            y[j] = scale * xr[j] + bias.map_or(0.0, |b| b[j]);
        }
        softmax_in_place(&mut y[..limit]);
    });
    out
}

/// Turns `v` into `softmax(v)`.
pub(super) fn softmax_in_place(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    v.iter_mut().for_each(|x| *x *= inv);
}

/// Gradient of the scores from the probabilities `y` and their gradient `g`
/// (rows of `k`): `scale · y ⊙ (g − Σ g·y)`.
pub(super) fn softmax_rows_bwd(y: &[f32], g: &[f32], k: usize, scale: f32) -> Vec<f32> {
    let mut dx = vec![0f32; y.len()];
    par_rows(&mut dx, k, |r, d| {
        let (yr, gr) = (&y[r * k..(r + 1) * k], &g[r * k..(r + 1) * k]);
        let dot: f32 = yr.iter().zip(gr).map(|(y, g)| y * g).sum();
        for j in 0..k {
            d[j] = scale * yr[j] * (gr[j] - dot);
        }
    });
    dx
}
