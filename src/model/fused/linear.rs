//! `x · wᵀ` as one graph node.

use super::fusable;
use candle_core::{CpuStorage, CustomOp2, D, Layout, Result, Shape, Tensor};

/// `x · wᵀ` for `x` `(..., in)` and `w` `(out, in)`: one graph node instead of the
/// reshape / transpose / matmul / reshape chain, and no weight gradient when `w`
/// does not train (a frozen base under LoRA).
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (out_dim, in_dim) = w.dims2()?;
    if x.dim(D::Minus1)? != in_dim {
        candle_core::bail!("linear: input {:?} for weight {:?}", x.dims(), w.dims());
    }
    if !(fusable(x) && fusable(w)) {
        let n = x.elem_count() / in_dim.max(1);
        let y = x.reshape((n, in_dim))?.matmul(&w.t()?)?;
        return y.reshape(with_last(x.dims(), out_dim));
    }
    x.contiguous()?.apply_op2(&w.contiguous()?, LinearOp)
}

/// `dims` with the last one replaced by `last`.
fn with_last(dims: &[usize], last: usize) -> Vec<usize> {
    let mut d = dims.to_vec();
    if let Some(l) = d.last_mut() {
        *l = last;
    }
    d
}

struct LinearOp;

/// Up to this many input rows (token-by-token sampling) the product is computed as
/// dot products over the weight's rows: the general matrix multiplication would
/// first repack the whole weight for a handful of rows (a third of an RL step's CPU
/// time went there).
pub(super) const FEW_ROWS: usize = 16;

/// `x · wᵀ` for a few rows `x` `(n, k)` and `w` `(out, k)`, parallel over weight rows.
pub(super) fn few_rows_times_wt(x: &[f32], w: &[f32], k: usize) -> Vec<f32> {
    use rayon::prelude::*;
    let (n, out) = (x.len() / k.max(1), w.len() / k.max(1));
    if n == 0 || out == 0 {
        return vec![0f32; n * out];
    }
    // Transposed result (out, n): each task reads a block of weight rows once.
    let mut yt = vec![0f32; out * n];
    yt.par_chunks_mut(n * 64).enumerate().for_each(|(blk, ys)| {
        for (jj, yrow) in ys.chunks_mut(n).enumerate() {
            let wr = &w[(blk * 64 + jj) * k..(blk * 64 + jj + 1) * k];
            for (i, y) in yrow.iter_mut().enumerate() {
                *y = super::simd::dot(&x[i * k..(i + 1) * k], wr);
            }
        }
    });
    let mut y = vec![0f32; n * out];
    for (j, col) in yt.chunks(n).enumerate() {
        for (i, v) in col.iter().enumerate() {
            y[i * out + j] = *v;
        }
    }
    y
}

impl CustomOp2 for LinearOp {
    fn name(&self) -> &'static str {
        "rmsweb-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        let (out_dim, in_dim) = l2.shape().dims2()?;
        let n = l1.shape().elem_count() / in_dim.max(1);
        let y = if n <= FEW_ROWS {
            let (x, w) = (super::f32_slice(s1, l1)?, super::f32_slice(s2, l2)?);
            CpuStorage::F32(few_rows_times_wt(x, w, in_dim))
        } else {
            let xl = Layout::contiguous_with_offset((n, in_dim), l1.start_offset());
            let wt = l2.transpose(0, 1)?;
            s1.matmul(s2, (1, n, out_dim, in_dim), &xl, &wt)?
        };
        Ok((y, Shape::from(with_last(l1.dims(), out_dim))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (out_dim, in_dim) = w.dims2()?;
        let n = x.elem_count() / in_dim.max(1);
        let g = grad.detach().contiguous()?.reshape((n, out_dim))?;
        let dx = g.matmul(&w.detach())?.reshape(x.shape())?;
        let dw = if w.track_op() {
            let x2 = x.detach().contiguous()?.reshape((n, in_dim))?;
            Some(g.t()?.matmul(&x2)?)
        } else {
            None
        };
        Ok((Some(dx), dw))
    }
}
