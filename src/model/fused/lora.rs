//! A linear layer with its LoRA adapter as one graph node.
//!
//! `y = x Wᵀ + s · ((x ⊙ m) Aᵀ) Bᵀ` with W frozen. Composed from candle ops the
//! adapter costs five full-size tensors per layer (the dropped-out input, its mask,
//! the up-projection, its scaled copy, the sum), each kept for the backward pass or
//! zero-filled and added there. Here the adapter's product is added into the base
//! product's buffer, the mask is recomputed from its seed instead of stored, and only
//! the rank-r activations `u = (x ⊙ m) Aᵀ` are kept for the backward pass.

use super::dropout::DropoutMask;
use super::gemm::{Mat, product_into};
use super::{f32_slice, fusable, with_f32};
use candle_core::{CpuStorage, CustomOp3, D, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::sync::Mutex;

/// `x Wᵀ + scale · ((x ⊙ mask) Aᵀ) Bᵀ` for `x` `(..., in)`, a frozen `w` `(out, in)`,
/// `a` `(r, in)` and `b` `(out, r)`, differentiable in `x`, `a` and `b`; `None` where
/// the fused kernels do not apply (not f32 on the CPU, or `w` trains).
pub fn lora_linear(
    x: &Tensor,
    w: &Tensor,
    a: &Tensor,
    b: &Tensor,
    scale: f64,
    mask: Option<DropoutMask>,
) -> Result<Option<Tensor>> {
    if w.track_op() || ![x, w, a, b].iter().all(|t| fusable(t)) {
        return Ok(None);
    }
    let (out_dim, in_dim) = w.dims2()?;
    let (r, a_in) = a.dims2()?;
    let (b_out, b_r) = b.dims2()?;
    if x.dim(D::Minus1)? != in_dim || (a_in, b_out, b_r) != (in_dim, out_dim, r) {
        candle_core::bail!(
            "lora_linear: input {:?}, weight {:?}, A {:?}, B {:?}",
            x.dims(),
            w.dims(),
            a.dims(),
            b.dims()
        );
    }
    let op = LoraLinear {
        w: w.contiguous()?,
        scale: scale as f32,
        mask,
        u: Mutex::new(Vec::new()),
    };
    x.contiguous()?
        .apply_op3(&a.contiguous()?, &b.contiguous()?, op)
        .map(Some)
}

struct LoraLinear {
    w: Tensor,
    scale: f32,
    mask: Option<DropoutMask>,
    /// `u = (x ⊙ m) Aᵀ` `(n, r)` from the forward pass, taken by the backward one
    /// (recomputed if missing).
    u: Mutex<Vec<f32>>,
}

/// `x ⊙ mask` (rows of `width` in parallel), or `x` itself without a mask.
fn masked<'a>(
    x: &'a [f32],
    mask: Option<DropoutMask>,
    width: usize,
) -> std::borrow::Cow<'a, [f32]> {
    let Some(m) = mask else {
        return std::borrow::Cow::Borrowed(x);
    };
    let mut out = vec![0f32; x.len()];
    out.par_chunks_mut(width.max(1))
        .zip(x.par_chunks(width.max(1)))
        .enumerate()
        .for_each(|(row, (o, xr))| m.apply(row * width, xr, o));
    std::borrow::Cow::Owned(out)
}

impl LoraLinear {
    /// `u = (x ⊙ m) Aᵀ`.
    fn down(&self, x: &[f32], a: &[f32], n: usize, r: usize, k: usize) -> Vec<f32> {
        let xd = masked(x, self.mask, k);
        let mut u = vec![0f32; n * r];
        product_into(
            &mut u,
            false,
            Mat::rows(&xd, n, k),
            Mat::rows(a, r, k).t(),
            1.0,
        );
        u
    }
}

impl CustomOp3 for LoraLinear {
    fn name(&self) -> &'static str {
        "rmsweb-lora-linear"
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
        let (x, a, b) = (f32_slice(s1, l1)?, f32_slice(s2, l2)?, f32_slice(s3, l3)?);
        let (out_dim, k) = self.w.dims2()?;
        let r = l2.shape().dims2()?.0;
        let n = x.len() / k.max(1);
        let (ws, wl) = self.w.storage_and_layout();
        let candle_core::Storage::Cpu(ws) = &*ws else {
            candle_core::bail!("lora_linear: weight is not on the CPU");
        };
        let w = f32_slice(ws, wl)?;
        let mut y = if n <= super::linear::FEW_ROWS {
            super::linear::few_rows_times_wt(x, w, k)
        } else {
            let mut y = vec![0f32; n * out_dim];
            product_into(
                &mut y,
                false,
                Mat::rows(x, n, k),
                Mat::rows(w, out_dim, k).t(),
                1.0,
            );
            y
        };
        let u = self.down(x, a, n, r, k);
        let bt = Mat::rows(b, out_dim, r).t();
        product_into(&mut y, true, Mat::rows(&u, n, r), bt, self.scale);
        if let Ok(mut keep) = self.u.lock() {
            *keep = u;
        }
        let mut dims = l1.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = out_dim;
        }
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (out_dim, k) = self.w.dims2()?;
        let r = a.dims2()?.0;
        let n = x.elem_count() / k.max(1);
        let kept = self
            .u
            .lock()
            .map(|mut u| std::mem::take(&mut *u))
            .unwrap_or_default();
        let s = self.scale;
        let (dx, da, db) = with_f32([x, a, b, grad, &self.w], |[x, a, b, g, w]| {
            let u = if kept.len() == n * r {
                kept
            } else {
                self.down(x, a, n, r, k)
            };
            let g_m = Mat::rows(g, n, out_dim);
            // du = s · g B  (n × r)
            let mut du = vec![0f32; n * r];
            product_into(&mut du, false, g_m, Mat::rows(b, out_dim, r), s);
            // dB = s · gᵀ u  (out × r)
            let mut db = vec![0f32; out_dim * r];
            product_into(&mut db, false, g_m.t(), Mat::rows(&u, n, r), s);
            // dA = duᵀ (x ⊙ m)  (r × in)
            let xd = masked(x, self.mask, k);
            let mut da = vec![0f32; r * k];
            product_into(
                &mut da,
                false,
                Mat::rows(&du, n, r).t(),
                Mat::rows(&xd, n, k),
                1.0,
            );
            drop(xd);
            // dx = g W + (du A) ⊙ m  (n × in)
            let mut dx = vec![0f32; n * k];
            product_into(&mut dx, false, g_m, Mat::rows(w, out_dim, k), 1.0);
            match self.mask {
                None => product_into(&mut dx, true, Mat::rows(&du, n, r), Mat::rows(a, r, k), 1.0),
                Some(m) => {
                    let mut t = vec![0f32; n * k];
                    product_into(&mut t, false, Mat::rows(&du, n, r), Mat::rows(a, r, k), 1.0);
                    dx.par_chunks_mut(k.max(1))
                        .zip(t.par_chunks(k.max(1)))
                        .enumerate()
                        .for_each(|(row, (d, tr))| {
                            m.for_each_factor(row * k, d.len(), |j, f| d[j] += tr[j] * f)
                        });
                }
            }
            Ok((dx, da, db))
        })?;
        let dev = x.device();
        Ok((
            Some(Tensor::from_vec(dx, x.shape(), dev)?),
            Some(Tensor::from_vec(da, a.shape(), dev)?),
            Some(Tensor::from_vec(db, b.shape(), dev)?),
        ))
    }
}
