//! The vision tower's layers: linear maps with bias, LayerNorm, the pre-norm block
//! with per-frame 2-D rotary attention, and the patch mergers.

use super::config::{Gelu, VisionConfig};
use crate::model::fused::{self, AttentionMask, RopeTables};
use candle_core::{D, DType, Result, Tensor};
use candle_nn::VarBuilder;

/// LayerNorm epsilon of every vision norm (fixed in transformers, not in the config).
pub(super) const NORM_EPS: f64 = 1e-6;

/// The dtype norms and rotary embeddings compute in: f32 for half precision (as
/// transformers does), the dtype itself otherwise.
pub(super) fn internal_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `x Wᵀ + b`.
#[derive(Debug, Clone)]
pub(super) struct Lin {
    pub(super) w: Tensor,
    pub(super) b: Tensor,
}

impl Lin {
    pub(super) fn load(vb: &VarBuilder, name: &str, out: usize, inp: usize) -> Result<Self> {
        let vb = vb.pp(name);
        Ok(Lin {
            w: vb.get((out, inp), "weight")?,
            b: vb.get(out, "bias")?,
        })
    }

    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        fused::linear(x, &self.w)?.broadcast_add(&self.b)
    }
}

/// LayerNorm over the last dimension, from differentiable ops.
#[derive(Debug, Clone)]
pub(super) struct LayerNorm {
    pub(super) w: Tensor,
    pub(super) b: Tensor,
}

impl LayerNorm {
    pub(super) fn load(vb: &VarBuilder, name: &str, dim: usize) -> Result<Self> {
        let vb = vb.pp(name);
        Ok(LayerNorm {
            w: vb.get(dim, "weight")?,
            b: vb.get(dim, "bias")?,
        })
    }

    /// Normalizes in f32 for half-precision inputs (as torch's LayerNorm), then scales
    /// in the input's dtype.
    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        let x = x.to_dtype(internal_dtype(dtype))?;
        let centered = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
        let var = centered.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = centered.broadcast_div(&(var + NORM_EPS)?.sqrt()?)?;
        normed
            .to_dtype(dtype)?
            .broadcast_mul(&self.w)?
            .broadcast_add(&self.b)
    }
}

/// One pre-norm transformer block.
#[derive(Debug, Clone)]
pub(super) struct Block {
    pub(super) norm1: LayerNorm,
    pub(super) norm2: LayerNorm,
    pub(super) qkv: Lin,
    pub(super) proj: Lin,
    pub(super) fc1: Lin,
    pub(super) fc2: Lin,
}

/// Where each frame's tokens lie and their rotary tables.
pub(super) struct Frames {
    /// `(first token, tokens)` of each frame (attention stays within one).
    pub(super) spans: Vec<(usize, usize)>,
    /// Rotary cos/sin `(tokens, head_dim / 2)` of each frame.
    pub(super) rope: Vec<RopeTables>,
    /// The tables' dtype.
    pub(super) dtype: DType,
}

impl Block {
    pub(super) fn load(cfg: &VisionConfig, vb: &VarBuilder) -> Result<Self> {
        let (h, inter) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Block {
            norm1: LayerNorm::load(vb, "norm1", h)?,
            norm2: LayerNorm::load(vb, "norm2", h)?,
            qkv: Lin::load(vb, "attn.qkv", 3 * h, h)?,
            proj: Lin::load(vb, "attn.proj", h, h)?,
            fc1: Lin::load(vb, "mlp.linear_fc1", inter, h)?,
            fc2: Lin::load(vb, "mlp.linear_fc2", h, inter)?,
        })
    }

    pub(super) fn forward(
        &self,
        x: &Tensor,
        frames: &Frames,
        heads: usize,
        act: Gelu,
    ) -> Result<Tensor> {
        let a = self.attention(&self.norm1.forward(x)?, frames, heads)?;
        let x = (x + a)?;
        let m = self
            .fc2
            .forward(&act.apply(&self.fc1.forward(&self.norm2.forward(&x)?)?)?)?;
        x + m
    }

    fn attention(&self, x: &Tensor, frames: &Frames, heads: usize) -> Result<Tensor> {
        let (n, hidden) = x.dims2()?;
        let hd = hidden / heads;
        let scale = 1.0 / (hd as f64).sqrt();
        let qkv = self.qkv.forward(x)?.reshape((n, 3, heads, hd))?;
        let part = |i: usize| qkv.narrow(1, i, 1)?.squeeze(1);
        let (q, k, v) = (part(0)?, part(1)?, part(2)?);
        let mask = AttentionMask {
            causal_past: None,
            key_bias: None,
            shared: None,
        };
        let mut outs = Vec::with_capacity(frames.spans.len());
        for (&(start, len), rope) in frames.spans.iter().zip(&frames.rope) {
            // (1, len, heads, hd)
            let chunk = |t: &Tensor| t.narrow(0, start, len)?.unsqueeze(0);
            let (qc, kc, vc) = (chunk(&q)?, chunk(&k)?, chunk(&v)?);
            if let Some(ctx) = fused::attention(&qc, &kc, &vc, rope, &mask, scale)? {
                outs.push(ctx.squeeze(0)?);
                continue;
            }
            let heads_first = |t: &Tensor| t.transpose(1, 2)?.contiguous();
            // Rotated in the tables' dtype (f32 for half precision), as transformers.
            let rotated = |t: &Tensor| {
                fused::rope(&heads_first(t)?.to_dtype(frames.dtype)?, rope)?.to_dtype(t.dtype())
            };
            let (qh, kh) = (rotated(&qc)?, rotated(&kc)?);
            let vh = heads_first(&vc)?;
            let scores = qh.matmul(&kh.t()?.contiguous()?)?;
            let probs = fused::attention_softmax(&scores, scale, &mask, None)?;
            let ctx = probs.matmul(&vh)?.transpose(1, 2)?;
            outs.push(ctx.reshape((len, hidden))?);
        }
        self.proj.forward(&Tensor::cat(&outs, 0)?)
    }
}

/// A patch merger: LayerNorm, `merge_unit` patches concatenated, `fc2(gelu(fc1))`.
#[derive(Debug, Clone)]
pub(super) struct Merger {
    pub(super) norm: LayerNorm,
    pub(super) fc1: Lin,
    pub(super) fc2: Lin,
    /// LayerNorm over the concatenated patches (DeepStack) rather than each patch.
    pub(super) postshuffle: bool,
}

impl Merger {
    pub(super) fn load(cfg: &VisionConfig, vb: &VarBuilder, postshuffle: bool) -> Result<Self> {
        let merged = cfg.hidden_size * cfg.merge_unit();
        let norm_dim = if postshuffle { merged } else { cfg.hidden_size };
        Ok(Merger {
            norm: LayerNorm::load(vb, "norm", norm_dim)?,
            fc1: Lin::load(vb, "linear_fc1", merged, merged)?,
            fc2: Lin::load(vb, "linear_fc2", cfg.out_hidden_size, merged)?,
            postshuffle,
        })
    }

    pub(super) fn forward(&self, x: &Tensor, unit: usize, act: Gelu) -> Result<Tensor> {
        let (n, h) = x.dims2()?;
        if !n.is_multiple_of(unit) {
            candle_core::bail!("patch merger: {n} patches are not whole blocks of {unit}");
        }
        let merged = if self.postshuffle {
            self.norm.forward(&x.reshape((n / unit, unit * h))?)?
        } else {
            self.norm.forward(x)?.reshape((n / unit, unit * h))?
        };
        self.fc2.forward(&act.apply(&self.fc1.forward(&merged)?)?)
    }
}
