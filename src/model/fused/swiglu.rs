//! The SwiGLU gate `silu(gate) · up`.

use super::{f32_slice, fusable, with_f32};
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `silu(gate) · up`, elementwise (same shapes).
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if !(fusable(gate) && fusable(up)) || gate.dims() != up.dims() {
        return gate.silu()? * up;
    }
    gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)
}

struct SwiGlu;

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// Elementwise chunks handed to one rayon task.
const ELEMWISE_CHUNK: usize = 16 * 1024;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "rmsweb-swiglu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (g, u) = (f32_slice(s1, l1)?, f32_slice(s2, l2)?);
        let mut out = vec![0f32; g.len()];
        out.par_chunks_mut(ELEMWISE_CHUNK)
            .zip(
                g.par_chunks(ELEMWISE_CHUNK)
                    .zip(u.par_chunks(ELEMWISE_CHUNK)),
            )
            .for_each(|(o, (g, u))| {
                for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                    *o = g * sigmoid(g) * u;
                }
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (dg, du) = with_f32([gate, up, grad], |[gs, us, ds]| {
            let mut dg = vec![0f32; gs.len()];
            let mut du = vec![0f32; gs.len()];
            dg.par_chunks_mut(ELEMWISE_CHUNK)
                .zip(du.par_chunks_mut(ELEMWISE_CHUNK))
                .enumerate()
                .for_each(|(c, (dg, du))| {
                    let o = c * ELEMWISE_CHUNK;
                    for i in 0..dg.len() {
                        let (g, u, d) = (gs[o + i], us[o + i], ds[o + i]);
                        let s = sigmoid(g);
                        du[i] = d * g * s;
                        dg[i] = d * u * s * (1.0 + g * (1.0 - s));
                    }
                });
            Ok((dg, du))
        })?;
        Ok((
            Some(Tensor::from_vec(dg, gate.shape(), gate.device())?),
            Some(Tensor::from_vec(du, up.shape(), up.device())?),
        ))
    }
}
