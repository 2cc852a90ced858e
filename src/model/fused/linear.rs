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
        let mut dims = x.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = out_dim;
        }
        return x.reshape((n, in_dim))?.matmul(&w.t()?)?.reshape(dims);
    }
    x.contiguous()?.apply_op2(&w.contiguous()?, LinearOp)
}

struct LinearOp;

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
        let xl = Layout::contiguous_with_offset((n, in_dim), l1.start_offset());
        let wt = l2.transpose(0, 1)?;
        let y = s1.matmul(s2, (1, n, out_dim, in_dim), &xl, &wt)?;
        let mut dims = l1.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = out_dim;
        }
        Ok((y, Shape::from(dims)))
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
