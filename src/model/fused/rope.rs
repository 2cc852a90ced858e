//! Rotary position embeddings (rotate-half layout).

use super::{f32_slice, fusable, par_rows, with_f32};
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// cos/sin rows `(positions, head_dim/2)` of the positions one forward pass covers.
#[derive(Debug, Clone)]
pub struct RopeTables {
    cos: Tensor,
    sin: Tensor,
    pub(super) flat: Option<Arc<(Vec<f32>, Vec<f32>)>>,
}

impl RopeTables {
    /// Tables for the rows of `cos`/`sin` (`(positions, head_dim/2)`).
    pub fn new(cos: Tensor, sin: Tensor) -> Result<Self> {
        let flat = if fusable(&cos) && fusable(&sin) {
            let c = cos.flatten_all()?.to_vec1::<f32>()?;
            let s = sin.flatten_all()?.to_vec1::<f32>()?;
            Some(Arc::new((c, s)))
        } else {
            None
        };
        Ok(RopeTables { cos, sin, flat })
    }
}

/// Rotary embedding (rotate-half layout, as `candle_nn::rotary_emb::rope_slow`) of
/// `x` `(batch, heads, positions, head_dim)`.
pub fn rope(x: &Tensor, t: &RopeTables) -> Result<Tensor> {
    match &t.flat {
        Some(flat) if fusable(x) => x.contiguous()?.apply_op1(Rope {
            tables: flat.clone(),
            inverse: false,
        }),
        _ => candle_nn::rotary_emb::rope_slow(&x.contiguous()?, &t.cos, &t.sin),
    }
}

struct Rope {
    tables: Arc<(Vec<f32>, Vec<f32>)>,
    /// Rotates by −θ (the transpose, i.e. the backward pass).
    inverse: bool,
}

impl Rope {
    fn run(&self, x: &[f32], dims: &[usize]) -> Result<Vec<f32>> {
        let [_, _, t, d] = dims else {
            candle_core::bail!("rope: expected 4 dims, got {dims:?}");
        };
        let (t, d) = (*t, *d);
        let half = d / 2;
        let (cos, sin) = (&self.tables.0, &self.tables.1);
        if d % 2 != 0 || cos.len() != t * half {
            candle_core::bail!("rope: tables of {} for {t} positions × {d}", cos.len());
        }
        let sign = if self.inverse { -1.0 } else { 1.0 };
        let mut out = vec![0f32; x.len()];
        par_rows(&mut out, d, |r, y| {
            let xr = &x[r * d..(r + 1) * d];
            let p = r % t;
            let (c, s) = (
                &cos[p * half..(p + 1) * half],
                &sin[p * half..(p + 1) * half],
            );
            for i in 0..half {
                let (x1, x2, si) = (xr[i], xr[i + half], sign * s[i]);
                y[i] = x1 * c[i] - x2 * si;
                y[i + half] = x2 * c[i] + x1 * si;
            }
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
            tables: self.tables.clone(),
            inverse: true,
        };
        let dx = with_f32(grad, |g| inv.run(g, arg.dims()))?;
        Ok(Some(Tensor::from_vec(dx, arg.shape(), arg.device())?))
    }
}
