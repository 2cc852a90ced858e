//! Attention of a few new tokens over a long decoding cache, read in place.
//!
//! While sampling, each step attends one token per row to every cached key. As a
//! matrix product that repacks the whole cache for one or two query rows per head;
//! here each (row, head, query) reads its kv head's keys and values once, straight
//! from the cache buffers (strided views, no copy). Not differentiable: it serves the
//! decoding cache ([`crate::model::KvCache::for_decoding`]) only.

use super::{AttentionMask, fusable, softmax_in_place};
use candle_core::{Layout, Result, Storage, Tensor};
use rayon::prelude::*;

/// Most new tokens per row that take this kernel (sampling steps; prompts do not).
const MAX_NEW_TOKENS: usize = 4;

/// `softmax(scale · q kᵀ + mask) v` for `q` `(b, heads, l, d)` (already rotated) and
/// cached `k`, `v` `(b, kv_heads, total, d)` views; `(b, heads, l, d)`. `None` when
/// the kernel does not apply (not f32 on the CPU, or more than
/// `MAX_NEW_TOKENS` (4) queries).
pub fn decode_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &AttentionMask,
    scale: f64,
) -> Result<Option<Tensor>> {
    if !(fusable(q) && fusable(k) && fusable(v)) {
        return Ok(None);
    }
    let (b, nh, l, d) = q.dims4()?;
    let (_, nkv, total, _) = k.dims4()?;
    if l > MAX_NEW_TOKENS
        || d == 0
        || k.dims() != v.dims()
        || nkv == 0
        || nh % nkv != 0
        || total < l
    {
        return Ok(None);
    }
    if mask
        .key_bias
        .as_ref()
        .is_some_and(|kb| kb.len() != b * total)
    {
        candle_core::bail!("decode attention: key mask does not cover {b}×{total} keys");
    }
    let q = q.contiguous()?;
    let (qs, ql) = q.storage_and_layout();
    let (ks, kl) = k.storage_and_layout();
    let (vs, vl) = v.storage_and_layout();
    let (Storage::Cpu(qs), Storage::Cpu(ks), Storage::Cpu(vs)) = (&*qs, &*ks, &*vs) else {
        return Ok(None);
    };
    let qd = &qs.as_slice::<f32>()?[ql.start_offset()..];
    let (kd, vd) = (ks.as_slice::<f32>()?, vs.as_slice::<f32>()?);
    let (kv_row, vv_row) = (RowView::new(kl)?, RowView::new(vl)?);
    let (g, scale) = (nh / nkv, scale as f32);
    let mut out = vec![0f32; b * nh * l * d];
    out.par_chunks_mut(d).enumerate().for_each(|(r, y)| {
        let (bi, h, qi) = (r / (nh * l), (r / l) % nh, r % l);
        let kvh = h / g;
        let qr = &qd[r * d..(r + 1) * d];
        let limit = mask.visible_keys(qi, total);
        let bias = mask.key_bias_row(bi, total);
        let mut p: Vec<f32> = (0..limit)
            .map(|j| {
                let kr = &kd[kv_row.at(bi, kvh, j)..][..d];
                scale * super::simd::dot(qr, kr) + bias.map_or(0.0, |b| b[j])
            })
            .collect();
        softmax_in_place(&mut p);
        for (j, &w) in p.iter().enumerate() {
            super::simd::add_scaled(y, w, &vd[vv_row.at(bi, kvh, j)..][..d]);
        }
    });
    Tensor::from_vec(out, (b, nh, l, d), q.device()).map(Some)
}

/// Offsets of the rows of a `(b, heads, positions, d)` view with unit inner stride.
struct RowView {
    start: usize,
    strides: [usize; 3],
}

impl RowView {
    fn new(l: &Layout) -> Result<Self> {
        match l.stride() {
            [s0, s1, s2, 1] => Ok(RowView {
                start: l.start_offset(),
                strides: [*s0, *s1, *s2],
            }),
            s => candle_core::bail!("decode attention: rows not contiguous (strides {s:?})"),
        }
    }

    fn at(&self, b: usize, h: usize, pos: usize) -> usize {
        self.start + b * self.strides[0] + h * self.strides[1] + pos * self.strides[2]
    }
}
