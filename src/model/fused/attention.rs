//! The attention core as one graph node: rotary embeddings, grouped-query scores,
//! masked softmax and the weighted sum of values, with a hand-written backward pass
//! (candle's autograd would add some twenty nodes per layer here, each paying a
//! zero-filled gradient and an add on the way back).

use super::rope::RopeRows;
use super::{
    AttentionMask, RopeTables, f32_slice, par_rows, softmax_rows, softmax_rows_bwd, with_f32,
};
use candle_core::{CpuStorage, CustomOp3, Device, Layout, Result, Shape, Tensor};
use std::sync::{Arc, Mutex};

/// `softmax(scale · rope(q) rope(k)ᵀ + mask) v` for `q` `(batch, seq, heads, head_dim)`
/// and `k`, `v` `(batch, seq, kv_heads, head_dim)` (query heads grouped over kv heads,
/// as Qwen3), without a KV cache; returns `(batch, seq, heads · head_dim)`. `None`
/// when the fused kernels do not apply (the caller takes the composite path).
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    rope: &RopeTables,
    mask: &AttentionMask,
    scale: f64,
) -> Result<Option<Tensor>> {
    let Some(tables) = &rope.flat else {
        return Ok(None);
    };
    if !(super::fusable(q) && super::fusable(k) && super::fusable(v)) {
        return Ok(None);
    }
    let (b, l, nh, d) = q.dims4()?;
    let (_, _, nkv, _) = k.dims4()?;
    if k.dims() != v.dims() || k.dims() != [b, l, nkv, d] || nkv == 0 || nh % nkv != 0 {
        candle_core::bail!(
            "attention: q {:?}, k {:?}, v {:?}",
            q.dims(),
            k.dims(),
            v.dims()
        );
    }
    if mask.key_bias.as_ref().is_some_and(|kb| kb.len() != b * l) {
        candle_core::bail!("attention: key mask does not cover {b}×{l} keys");
    }
    let op = AttentionCore {
        tables: tables.clone(),
        mask: mask.clone(),
        scale: scale as f32,
        saved: Mutex::new(None),
    };
    q.contiguous()?
        .apply_op3(&k.contiguous()?, &v.contiguous()?, op)
        .map(Some)
}

/// What the backward pass reuses: rotated queries `(b, kv, g·l, d)`, rotated keys and
/// values `(b, kv, l, d)`, probabilities `(b, kv, g·l, l)`.
struct Saved {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    probs: Tensor,
}

struct AttentionCore {
    tables: Arc<RopeRows>,
    mask: AttentionMask,
    scale: f32,
    saved: Mutex<Option<Saved>>,
}

/// How a row is rotated while it moves.
#[derive(Clone, Copy)]
enum Rotation {
    None,
    /// By +θ (forward) or −θ (backward) of the position on the input's second axis.
    ByInputAxis1(f32),
    /// The same, position on the input's third axis.
    ByInputAxis2(f32),
}

/// Swaps axes 1 and 2 of rows laid out `(b, a, c, d)` (output `(b, c, a, d)`),
/// rotating each row (rotate-half layout) when asked.
fn swap_axes(
    x: &[f32],
    (b, a, c, d): (usize, usize, usize, usize),
    rot: Rotation,
    t: &RopeRows,
) -> Vec<f32> {
    debug_assert_eq!(x.len(), b * a * c * d);
    let mut out = vec![0f32; x.len()];
    par_rows(&mut out, d, |r, y| {
        let (bi, rest) = (r / (c * a), r % (c * a));
        let (ci, ai) = (rest / a, rest % a);
        let src = ((bi * a + ai) * c + ci) * d;
        let xr = &x[src..src + d];
        match rot {
            Rotation::None => y.copy_from_slice(xr),
            Rotation::ByInputAxis1(sign) => t.rotate(xr, y, ai, sign),
            Rotation::ByInputAxis2(sign) => t.rotate(xr, y, ci, sign),
        }
    });
    out
}

impl AttentionCore {
    fn dims(q: &[usize], k: &[usize]) -> Result<(usize, usize, usize, usize, usize)> {
        match (q, k) {
            ([b, l, nh, d], [_, _, nkv, _]) => Ok((*b, *l, *nh, *nkv, *d)),
            _ => candle_core::bail!("attention: q {q:?}, k {k:?}"),
        }
    }
}

impl CustomOp3 for AttentionCore {
    fn name(&self) -> &'static str {
        "rmsweb-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (b, l, nh, nkv, d) = Self::dims(l1.dims(), l2.dims())?;
        let g = nh / nkv;
        if !self.tables.covers(l, d) {
            candle_core::bail!("attention: rope tables do not cover {l} positions");
        }
        let (q, k, v) = (f32_slice(s1, l1)?, f32_slice(s2, l2)?, f32_slice(s3, l3)?);
        let t = &*self.tables;
        let dev = Device::Cpu;
        let q = swap_axes(q, (b, l, nh, d), Rotation::ByInputAxis1(1.0), t);
        let k = swap_axes(k, (b, l, nkv, d), Rotation::ByInputAxis1(1.0), t);
        let v = swap_axes(v, (b, l, nkv, d), Rotation::None, t);
        let q = Tensor::from_vec(q, (b, nkv, g * l, d), &dev)?;
        let k = Tensor::from_vec(k, (b, nkv, l, d), &dev)?;
        let v = Tensor::from_vec(v, (b, nkv, l, d), &dev)?;
        let scores = q.matmul(&k.t()?)?;
        let probs = with_f32([&scores], |[s]| {
            Ok(softmax_rows(s, (nh, l, l), self.scale, &self.mask))
        })?;
        let probs = Tensor::from_vec(probs, (b, nkv, g * l, l), &dev)?;
        let ctx = probs.matmul(&v)?; // (b, nh, l, d)
        let out = with_f32([&ctx], |[c]| {
            Ok(swap_axes(c, (b, nh, l, d), Rotation::None, t))
        })?;
        if let Ok(mut saved) = self.saved.lock() {
            *saved = Some(Saved { q, k, v, probs });
        }
        Ok((CpuStorage::F32(out), Shape::from((b, l, nh * d))))
    }

    fn bwd(
        &self,
        q_in: &Tensor,
        k_in: &Tensor,
        v_in: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (b, l, nh, nkv, d) = Self::dims(q_in.dims(), k_in.dims())?;
        let g = nh / nkv;
        let saved = self.saved.lock().ok().and_then(|mut s| s.take());
        let Some(Saved { q, k, v, probs }) = saved else {
            candle_core::bail!("attention: backward without a forward pass");
        };
        let t = &*self.tables;
        let dev = Device::Cpu;
        let dctx = with_f32([grad], |[gr]| {
            Ok(swap_axes(gr, (b, l, nh, d), Rotation::None, t))
        })?;
        let dctx = Tensor::from_vec(dctx, (b, nkv, g * l, d), &dev)?;
        let dprobs = dctx.matmul(&v.t()?)?;
        let dv = probs.t()?.matmul(&dctx)?; // (b, kv, l, d)
        let dscores = with_f32([&probs, &dprobs], |[p, gp]| {
            Ok(softmax_rows_bwd(p, gp, l, self.scale))
        })?;
        let dscores = Tensor::from_vec(dscores, (b, nkv, g * l, l), &dev)?;
        let dq = dscores.matmul(&k)?; // (b, nh, l, d), rotated
        let dk = dscores.t()?.matmul(&q)?; // (b, kv, l, d), rotated
        let back = Rotation::ByInputAxis2(-1.0);
        let dq = with_f32([&dq], |[x]| Ok(swap_axes(x, (b, nh, l, d), back, t)))?;
        let dk = with_f32([&dk], |[x]| Ok(swap_axes(x, (b, nkv, l, d), back, t)))?;
        let dv = with_f32([&dv], |[x]| {
            Ok(swap_axes(x, (b, nkv, l, d), Rotation::None, t))
        })?;
        Ok((
            Some(Tensor::from_vec(dq, q_in.shape(), q_in.device())?),
            Some(Tensor::from_vec(dk, k_in.shape(), k_in.device())?),
            Some(Tensor::from_vec(dv, v_in.shape(), v_in.device())?),
        ))
    }
}
