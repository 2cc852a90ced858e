//! RMS norm over the last dimension.

use super::{MIN_ROWS_PER_TASK, f32_slice, fusable, par_rows, with_f32};
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension (x contiguous rows,
/// w of the row width); gradients for both.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    if !(fusable(x) && fusable(w)) {
        return candle_nn::ops::rms_norm_slow(x, w, eps);
    }
    x.contiguous()?.apply_op2(&w.contiguous()?, RmsNorm { eps })
}

struct RmsNorm {
    eps: f32,
}

fn inv_rms(row: &[f32], eps: f32) -> f32 {
    let ss: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    (1.0 / (ss / row.len() as f64 + f64::from(eps)).sqrt()) as f32
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rmsweb-rms-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, w) = (f32_slice(s1, l1)?, f32_slice(s2, l2)?);
        let n = w.len();
        if n == 0 || l1.dims().last() != Some(&n) {
            candle_core::bail!("rms_norm: weight of {n} for input {:?}", l1.dims());
        }
        let mut out = vec![0f32; x.len()];
        par_rows(&mut out, n, |r, y| {
            let xr = &x[r * n..(r + 1) * n];
            let inv = inv_rms(xr, self.eps);
            for ((y, &xv), &wv) in y.iter_mut().zip(xr).zip(w) {
                *y = xv * inv * wv;
            }
        });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let n = w.elem_count();
        let rows = x.elem_count() / n;
        let (dx, dw) = with_f32([x, w, grad], |[xs, ws, gs]| {
            // Each row's 1 / rms, computed once for both gradients.
            let invs: Vec<f32> = xs
                .par_chunks(n)
                .with_min_len(MIN_ROWS_PER_TASK)
                .map(|r| inv_rms(r, self.eps))
                .collect();
            let mut dx = vec![0f32; xs.len()];
            par_rows(&mut dx, n, |r, d| {
                let (xr, gr, inv) = (&xs[r * n..(r + 1) * n], &gs[r * n..(r + 1) * n], invs[r]);
                let dot: f32 = xr.iter().zip(gr).zip(ws).map(|((x, g), w)| x * g * w).sum();
                let c = inv * inv * inv * dot / n as f32;
                for i in 0..n {
                    d[i] = inv * gr[i] * ws[i] - xr[i] * c;
                }
            });
            // dw_i = Σ_rows g_i · x_i · inv_row, reduced over row blocks.
            let dw = (0..rows)
                .into_par_iter()
                .with_min_len(64)
                .fold(
                    || vec![0f32; n],
                    |mut acc, r| {
                        let (xr, gr) = (&xs[r * n..(r + 1) * n], &gs[r * n..(r + 1) * n]);
                        for i in 0..n {
                            acc[i] += gr[i] * xr[i] * invs[r];
                        }
                        acc
                    },
                )
                .reduce(
                    || vec![0f32; n],
                    |mut a, b| {
                        a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                        a
                    },
                );
            Ok((dx, dw))
        })?;
        Ok((
            Some(Tensor::from_vec(dx, x.shape(), x.device())?),
            Some(Tensor::from_vec(dw, w.shape(), w.device())?),
        ))
    }
}
