//! Log-probabilities of target tokens.

use super::{MIN_ROWS_PER_TASK, f32_slice, fusable, par_rows, with_f32};
use candle_core::{CpuStorage, CustomOp1, D, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::sync::Mutex;

/// `log_softmax(logits)[n, targets[n]]` for logits `(rows, vocab)`: the log-probability
/// of each row's target, `(rows,)`, differentiable in the logits.
pub fn target_log_probs(logits: &Tensor, targets: &[u32]) -> Result<Tensor> {
    let (rows, vocab) = logits.dims2()?;
    if targets.len() != rows {
        candle_core::bail!("{} targets for {rows} rows of logits", targets.len());
    }
    if vocab == 0 {
        candle_core::bail!("logits over an empty vocabulary");
    }
    if let Some(t) = targets.iter().find(|&&t| t as usize >= vocab) {
        candle_core::bail!("target token {t} outside the vocabulary of {vocab}");
    }
    if !fusable(logits) {
        let tgt = Tensor::from_vec(targets.to_vec(), (rows, 1), logits.device())?;
        let lsm = candle_nn::ops::log_softmax(logits, D::Minus1)?;
        return lsm.gather(&tgt, D::Minus1)?.squeeze(D::Minus1);
    }
    logits.contiguous()?.apply_op1(TargetLogProbs {
        targets: targets.to_vec(),
        lse: Mutex::new(Vec::new()),
    })
}

struct TargetLogProbs {
    targets: Vec<u32>,
    /// Each row's log-sum-exp, kept from the forward pass for the backward one (which
    /// takes it; recomputed if missing).
    lse: Mutex<Vec<f32>>,
}

fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
    max + sum.ln()
}

impl CustomOp1 for TargetLogProbs {
    fn name(&self) -> &'static str {
        "rmsweb-target-log-probs"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l)?;
        let (rows, v) = l.shape().dims2()?;
        let lse: Vec<f32> = x
            .par_chunks(v)
            .with_min_len(MIN_ROWS_PER_TASK)
            .map(log_sum_exp)
            .collect();
        let out = (0..rows)
            .map(|r| x[r * v + self.targets[r] as usize] - lse[r])
            .collect();
        if let Ok(mut keep) = self.lse.lock() {
            *keep = lse;
        }
        Ok((CpuStorage::F32(out), Shape::from(rows)))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let (_, v) = arg.dims2()?;
        let kept = self
            .lse
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        let dx = with_f32([arg, grad], |[x, g]| {
            let mut dx = vec![0f32; x.len()];
            par_rows(&mut dx, v, |r, d| {
                let gr = g[r];
                if gr == 0.0 {
                    return; // e.g. a masked (non-assistant) position
                }
                let xr = &x[r * v..(r + 1) * v];
                let lse = kept.get(r).copied().unwrap_or_else(|| log_sum_exp(xr));
                for j in 0..v {
                    d[j] = -gr * (xr[j] - lse).exp();
                }
                d[self.targets[r] as usize] += gr;
            });
            Ok(dx)
        })?;
        Ok(Some(Tensor::from_vec(dx, arg.shape(), arg.device())?))
    }
}
