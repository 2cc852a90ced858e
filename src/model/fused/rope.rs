//! Rotary position embeddings (rotate-half layout).

use super::{f32_slice, fusable, par_rows, with_f32};
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// cos/sin rows `(positions, head_dim/2)` of the positions one forward pass covers.
#[derive(Debug, Clone)]
pub struct RopeTables {
    cos: Tensor,
    sin: Tensor,
    pub(super) flat: Option<Arc<RopeRows>>,
}

impl RopeTables {
    /// Tables for the rows of `cos`/`sin` (`(positions, head_dim/2)`).
    pub fn new(cos: Tensor, sin: Tensor) -> Result<Self> {
        let flat = if fusable(&cos) && fusable(&sin) {
            Some(Arc::new(RopeRows {
                half: cos.dim(1)?,
                cos: cos.flatten_all()?.to_vec1::<f32>()?,
                sin: sin.flatten_all()?.to_vec1::<f32>()?,
            }))
        } else {
            None
        };
        Ok(RopeTables { cos, sin, flat })
    }
}

/// The same tables as plain rows, for the CPU kernels.
#[derive(Debug)]
pub(super) struct RopeRows {
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Half the head dimension: values per position.
    half: usize,
}

impl RopeRows {
    /// Whether the tables hold `positions` positions of rows `d` wide.
    pub(super) fn covers(&self, positions: usize, d: usize) -> bool {
        d == 2 * self.half && self.cos.len() == positions * self.half
    }

    /// Writes `x` rotated by +θ (`sign` 1) or −θ (`sign` −1, the transpose) of
    /// position `pos` into `y`.
    pub(super) fn rotate(&self, x: &[f32], y: &mut [f32], pos: usize, sign: f32) {
        let h = self.half;
        let (cos, sin) = (
            &self.cos[pos * h..(pos + 1) * h],
            &self.sin[pos * h..(pos + 1) * h],
        );
        for i in 0..h {
            let (x1, x2, s) = (x[i], x[i + h], sign * sin[i]);
            y[i] = x1 * cos[i] - x2 * s;
            y[i + h] = x2 * cos[i] + x1 * s;
        }
    }
}

/// Rotary embedding (rotate-half layout, as `candle_nn::rotary_emb::rope_slow`) of
/// `x` `(batch, heads, positions, head_dim)`.
pub fn rope(x: &Tensor, t: &RopeTables) -> Result<Tensor> {
    match &t.flat {
        Some(flat) if fusable(x) => x.contiguous()?.apply_op1(Rope {
            rows: flat.clone(),
            sign: 1.0,
        }),
        _ => candle_nn::rotary_emb::rope_slow(&x.contiguous()?, &t.cos, &t.sin),
    }
}

struct Rope {
    rows: Arc<RopeRows>,
    /// 1: rotate by +θ; −1: by −θ (the transpose, i.e. the backward pass).
    sign: f32,
}

impl Rope {
    fn run(&self, x: &[f32], dims: &[usize]) -> Result<Vec<f32>> {
        let [_, _, t, d] = dims else {
            candle_core::bail!("rope: expected 4 dims, got {dims:?}");
        };
        let (t, d) = (*t, *d);
        if !self.rows.covers(t, d) {
            candle_core::bail!("rope: tables do not cover {t} positions × {d}");
        }
        let mut out = vec![0f32; x.len()];
        par_rows(&mut out, d, |r, y| {
            self.rows
                .rotate(&x[r * d..(r + 1) * d], y, r % t, self.sign);
        });
        Ok(out)
    }
}

impl CustomOp1 for Rope {
    fn name(&self) -> &'static str {
        "rmsweb-rope"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = self.run(f32_slice(s, l)?, l.dims())?;
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let inv = Rope {
            rows: self.rows.clone(),
            sign: -self.sign,
        };
        let dx = with_f32([grad], |[g]| inv.run(g, arg.dims()))?;
        Ok(Some(Tensor::from_vec(dx, arg.shape(), arg.device())?))
    }
}
