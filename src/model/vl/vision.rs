//! The Qwen3-VL vision tower: patch pixels in, language-model-sized image tokens out.
//!
//! Follows Hugging Face transformers' `Qwen3VLVisionModel` (`modeling_qwen3_vl.py`):
//!
//! 1. **patch embedding**: the `Conv3d` whose kernel equals its stride
//!    `(temporal_patch, patch, patch)` sees each patch once, so it is a linear map of
//!    the flattened patch row (`(channel, temporal, patch_h, patch_w)`, the order
//!    [`preprocess`](mod@super::preprocess) writes) — computed here as one matrix
//!    product plus bias;
//! 2. **learned position embeddings** on a `sqrt(num_position_embeddings)` square grid,
//!    bilinearly interpolated to each image's `grid_h x grid_w`
//!    (`fast_pos_embed_interpolate`: `linspace` sample points, floor / floor+1 corners),
//!    repeated over frames, in merge-block order;
//! 3. `depth` pre-norm **blocks**: LayerNorm (eps 1e-6), attention with a fused `qkv`
//!    projection and 2-D rotary embeddings (the first half of each head's rotary
//!    angles from the patch's row, the second half from its column; rotate-half
//!    layout, base 10000), full (non-causal) attention within each frame, and an MLP
//!    `fc2(act(fc1(x)))` with `hidden_act` (`gelu_pytorch_tanh`);
//! 4. the **patch merger**: LayerNorm per patch, then each `spatial_merge_size²`
//!    consecutive patches (one merge block) concatenated and mapped by
//!    `fc2(gelu(fc1(x)))` to `out_hidden_size`; the **DeepStack mergers** do the same to
//!    the outputs of the blocks named in `deepstack_visual_indexes`, with the LayerNorm
//!    after concatenation.
//!
//! The mergers' GELU is the exact (erf) one, as transformers' `nn.GELU()`;
//! candle-transformers 0.11's port uses the tanh approximation there
//! ([`VisionModel::with_merger_act`] selects it, for comparisons).
//!
//! Every op carries gradients: f32 on the CPU takes [`crate::model::fused`]'s
//! attention and linear kernels, everything else candle's composite ops (LayerNorm and
//! softmax are written out rather than candle's fused versions, which drop gradients).
//!
//! **Checked** (`tests/it/vl.rs`, random weights at unit scale, two images, one of two
//! frames): against an f64 reference written from transformers' formulas, within
//! 1.3e-6 in f32 and 2.7e-7 in f64 (the rotary angles and interpolation weights are
//! f32, as in transformers); against candle-transformers 0.11.1's tower within 1.8e-6,
//! up to each token's scale (its tower is reachable only through `Qwen3VLModel`'s
//! normalized logits); gradients against finite differences in f64. **Not checked**
//! against transformers itself (no fixture made with torch yet).

use crate::model::fused::RopeTables;
use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::VarBuilder;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use std::collections::HashMap;

mod config;
mod layers;
pub use config::{Gelu, VisionConfig};
use layers::{Block, Frames, Lin, Merger, internal_dtype};

/// Where the vision tower's weights live in a Qwen3-VL checkpoint.
pub const VISUAL_PREFIX: &str = "model.visual";

/// Base of the vision rotary embedding (fixed in transformers).
const ROPE_THETA: f32 = 10_000.0;

/// The Qwen3-VL vision tower (see the module documentation).
#[derive(Debug, Clone)]
pub struct VisionModel {
    cfg: VisionConfig,
    /// The patch `Conv3d` as a matrix `(hidden, patch_dim)`.
    patch_embed: Lin,
    pos_embed: Tensor,
    blocks: Vec<Block>,
    merger: Merger,
    deepstack: Vec<Merger>,
    mlp_act: Gelu,
    merger_act: Gelu,
}

impl VisionModel {
    /// Builds the tower from `vb` positioned at the tower's weights (for a whole
    /// checkpoint `vb.pp(VISUAL_PREFIX)`), HF names. Weights that are variables (a
    /// `VarMap`) receive gradients.
    pub fn new(cfg: &VisionConfig, vb: VarBuilder) -> Result<Self> {
        cfg.validate()?;
        let h = cfg.hidden_size;
        let (t, p) = (cfg.temporal_patch_size, cfg.patch_size);
        let pe = vb.pp("patch_embed.proj");
        let patch_embed = Lin {
            w: pe
                .get((h, cfg.in_channels, t, p, p), "weight")?
                .reshape((h, cfg.patch_dim()))?,
            b: pe.get(h, "bias")?,
        };
        let pos_embed = vb.get((cfg.num_position_embeddings, h), "pos_embed.weight")?;
        let blocks = (0..cfg.depth)
            .map(|i| Block::load(cfg, &vb.pp(format!("blocks.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let merger = Merger::load(cfg, &vb.pp("merger"), false)?;
        let deepstack = (0..cfg.deepstack_visual_indexes.len())
            .map(|j| Merger::load(cfg, &vb.pp(format!("deepstack_merger_list.{j}")), true))
            .collect::<Result<Vec<_>>>()?;
        Ok(VisionModel {
            mlp_act: cfg.mlp_act()?,
            cfg: cfg.clone(),
            patch_embed,
            pos_embed,
            blocks,
            merger,
            deepstack,
            merger_act: Gelu::Erf,
        })
    }

    /// Builds the tower from weights named as in a checkpoint (`model.visual.…`,
    /// [`VISUAL_PREFIX`]), cast to `dtype` on `device`.
    pub fn from_weights(
        cfg: &VisionConfig,
        weights: HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let vb = VarBuilder::from_tensors(weights, dtype, device);
        Self::new(cfg, vb.pp(VISUAL_PREFIX))
    }

    /// [`Self::from_weights`] with every tower weight a training variable; returns the
    /// variables by checkpoint name (for an optimizer or a checkpoint).
    pub fn from_weights_trainable(
        cfg: &VisionConfig,
        weights: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<(Self, Vec<(String, Var)>)> {
        cfg.validate()?;
        let mut vars = Vec::new();
        for (name, _) in cfg.weight_shapes() {
            let full = format!("{VISUAL_PREFIX}.{name}");
            let t = weights
                .get(&full)
                .ok_or_else(|| candle_core::Error::Msg(format!("weight `{full}` is missing")))?;
            let v = Var::from_tensor(&t.to_dtype(dtype)?.to_device(device)?)?;
            vars.push((full, v));
        }
        let tensors = vars
            .iter()
            .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
            .collect();
        Ok((Self::from_weights(cfg, tensors, dtype, device)?, vars))
    }

    /// Seeded random weights, HF names under [`VISUAL_PREFIX`], f32 on the CPU: matrices
    /// and embeddings normal with std 0.02 (transformers' `initializer_range`), biases
    /// zero, LayerNorm weights one.
    pub fn random_weights(cfg: &VisionConfig, seed: u64) -> Result<HashMap<String, Tensor>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let normal = Normal::new(0.0f32, 0.02).map_err(candle_core::Error::wrap)?;
        let dev = Device::Cpu;
        let mut out = HashMap::new();
        for (name, shape) in cfg.weight_shapes() {
            let t = if name.ends_with(".bias") {
                Tensor::zeros(shape, DType::F32, &dev)?
            } else if shape.len() == 1 {
                Tensor::ones(shape, DType::F32, &dev)?
            } else {
                let n: usize = shape.iter().product();
                let v: Vec<f32> = (0..n).map(|_| normal.sample(&mut rng)).collect();
                Tensor::from_vec(v, shape, &dev)?
            };
            out.insert(format!("{VISUAL_PREFIX}.{name}"), t);
        }
        Ok(out)
    }

    /// The same tower with the mergers' GELU set to `act` (default [`Gelu::Erf`], as
    /// transformers; candle-transformers 0.11 uses [`Gelu::Tanh`]).
    pub fn with_merger_act(mut self, act: Gelu) -> Self {
        self.merger_act = act;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &VisionConfig {
        &self.cfg
    }

    /// The tower's weights under checkpoint names ([`VISUAL_PREFIX`]), the shapes of
    /// [`VisionConfig::weight_shapes`] (the patch embedding as its `Conv3d` kernel).
    pub fn named_weights(&self) -> Result<HashMap<String, Tensor>> {
        let cfg = &self.cfg;
        let mut out = HashMap::new();
        let mut pair = |name: &str, w: &Tensor, b: &Tensor| {
            out.insert(format!("{VISUAL_PREFIX}.{name}.weight"), w.clone());
            out.insert(format!("{VISUAL_PREFIX}.{name}.bias"), b.clone());
        };
        let (t, p) = (cfg.temporal_patch_size, cfg.patch_size);
        let kernel = self
            .patch_embed
            .w
            .reshape((cfg.hidden_size, cfg.in_channels, t, p, p))?;
        pair("patch_embed.proj", &kernel, &self.patch_embed.b);
        for (i, b) in self.blocks.iter().enumerate() {
            for (part, w, bias) in [
                ("norm1", &b.norm1.w, &b.norm1.b),
                ("norm2", &b.norm2.w, &b.norm2.b),
                ("attn.qkv", &b.qkv.w, &b.qkv.b),
                ("attn.proj", &b.proj.w, &b.proj.b),
                ("mlp.linear_fc1", &b.fc1.w, &b.fc1.b),
                ("mlp.linear_fc2", &b.fc2.w, &b.fc2.b),
            ] {
                pair(&format!("blocks.{i}.{part}"), w, bias);
            }
        }
        let mergers = std::iter::once(("merger".to_string(), &self.merger)).chain(
            self.deepstack
                .iter()
                .enumerate()
                .map(|(j, m)| (format!("deepstack_merger_list.{j}"), m)),
        );
        for (name, m) in mergers {
            pair(&format!("{name}.norm"), &m.norm.w, &m.norm.b);
            pair(&format!("{name}.linear_fc1"), &m.fc1.w, &m.fc1.b);
            pair(&format!("{name}.linear_fc2"), &m.fc2.w, &m.fc2.b);
        }
        out.insert(
            format!("{VISUAL_PREFIX}.pos_embed.weight"),
            self.pos_embed.clone(),
        );
        Ok(out)
    }

    /// Image tokens and DeepStack features of the images (or videos) described by
    /// `grid_thw` (`[t, h, w]` patches each, in order), whose patch rows
    /// `pixel_values` `(Σ t·h·w, patch_dim)` are concatenated in that order.
    ///
    /// Returns the merged tokens `(Σ t·h·w / merge_unit, out_hidden_size)` and one
    /// tensor of that shape per `deepstack_visual_indexes` entry, in block order (as
    /// transformers).
    pub fn forward(
        &self,
        pixel_values: &Tensor,
        grid_thw: &[[usize; 3]],
    ) -> Result<(Tensor, Vec<Tensor>)> {
        let cfg = &self.cfg;
        let dtype = self.pos_embed.dtype();
        let (rows, width) = pixel_values.dims2().map_err(|_| {
            candle_core::Error::Msg(format!(
                "pixel_values must be (patches, {}), got {:?}",
                cfg.patch_dim(),
                pixel_values.dims()
            ))
        })?;
        if width != cfg.patch_dim() {
            candle_core::bail!(
                "pixel_values rows hold {width} values, the vision config wants {} (channels x temporal x patch²)",
                cfg.patch_dim()
            );
        }
        if grid_thw.is_empty() {
            candle_core::bail!("grid_thw names no image");
        }
        let m = cfg.spatial_merge_size;
        let mut total = 0usize;
        for (i, &[t, h, w]) in grid_thw.iter().enumerate() {
            if t == 0 || h == 0 || w == 0 || !h.is_multiple_of(m) || !w.is_multiple_of(m) {
                candle_core::bail!(
                    "grid_thw[{i}] = [{t}, {h}, {w}]: sides must be positive multiples of spatial_merge_size {m}"
                );
            }
            total = t
                .checked_mul(h)
                .and_then(|x| x.checked_mul(w))
                .and_then(|x| x.checked_add(total))
                .ok_or_else(|| candle_core::Error::Msg("grid_thw overflows".into()))?;
        }
        if total != rows {
            candle_core::bail!("grid_thw covers {total} patches, pixel_values has {rows} rows");
        }
        let device = self.pos_embed.device();
        let x = self
            .patch_embed
            .forward(&pixel_values.to_dtype(dtype)?.to_device(device)?)?;
        let mut x = (x + self.position_embeddings(grid_thw)?)?;
        let frames = self.frames(grid_thw)?;
        let mut deepstack = Vec::with_capacity(self.deepstack.len());
        let unit = cfg.merge_unit();
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(&x, &frames, cfg.num_heads, self.mlp_act)?;
            if let Some(j) = cfg.deepstack_visual_indexes.iter().position(|&l| l == i) {
                deepstack.push(self.deepstack[j].forward(&x, unit, self.merger_act)?);
            }
        }
        let embeds = self.merger.forward(&x, unit, self.merger_act)?;
        Ok((embeds, deepstack))
    }

    /// Patch `(row, column)` positions of one frame in merge-block order.
    fn frame_positions(&self, h: usize, w: usize) -> Vec<(usize, usize)> {
        let m = self.cfg.spatial_merge_size;
        let mut pos = Vec::with_capacity(h * w);
        for br in 0..h / m {
            for bc in 0..w / m {
                for ir in 0..m {
                    for ic in 0..m {
                        pos.push((br * m + ir, bc * m + ic));
                    }
                }
            }
        }
        pos
    }

    /// Learned position embeddings bilinearly interpolated to each grid, in the
    /// patches' (merge-block) order, `(Σ t·h·w, hidden)`.
    fn position_embeddings(&self, grid_thw: &[[usize; 3]]) -> Result<Tensor> {
        let side = self.cfg.grid_side();
        let mut idx: [Vec<u32>; 4] = Default::default();
        let mut wts: [Vec<f32>; 4] = Default::default();
        for &[t, h, w] in grid_thw {
            let (hs, ws) = (linspace(side, h), linspace(side, w));
            let corner = |v: f32| {
                let lo = v as usize; // v >= 0: truncation is floor, as `.int()`
                (lo, (lo + 1).min(side - 1), v - lo as f32)
            };
            let pos = self.frame_positions(h, w);
            for _ in 0..t {
                for &(r, c) in &pos {
                    let (r0, r1, dh) = corner(hs[r]);
                    let (c0, c1, dw) = corner(ws[c]);
                    let cells = [(r0, c0), (r0, c1), (r1, c0), (r1, c1)];
                    let weights = [
                        (1.0 - dh) * (1.0 - dw),
                        (1.0 - dh) * dw,
                        dh * (1.0 - dw),
                        dh * dw,
                    ];
                    for k in 0..4 {
                        idx[k].push((cells[k].0 * side + cells[k].1) as u32);
                        wts[k].push(weights[k]);
                    }
                }
            }
        }
        let n = idx[0].len();
        let device = self.pos_embed.device();
        let idx = Tensor::from_vec(idx.concat(), 4 * n, device)?;
        let wts =
            Tensor::from_vec(wts.concat(), (4, n, 1), device)?.to_dtype(self.pos_embed.dtype())?;
        let hidden = self.cfg.hidden_size;
        let gathered = self
            .pos_embed
            .index_select(&idx, 0)?
            .reshape((4, n, hidden))?;
        gathered.broadcast_mul(&wts)?.sum(0)
    }

    /// Frame spans and their 2-D rotary tables.
    fn frames(&self, grid_thw: &[[usize; 3]]) -> Result<Frames> {
        let hd = self.cfg.head_dim();
        let quarter = hd / 4;
        // transformers: 1 / theta^(arange(0, dim, 2) / dim) for dim = hd / 2, in f32.
        let inv_freq: Vec<f32> = (0..quarter)
            .map(|j| 1.0 / ROPE_THETA.powf((2 * j) as f32 / (hd / 2) as f32))
            .collect();
        let device = self.pos_embed.device();
        let dtype = internal_dtype(self.pos_embed.dtype());
        let mut frames = Frames {
            spans: Vec::new(),
            rope: Vec::new(),
            dtype,
        };
        let mut start = 0;
        for &[t, h, w] in grid_thw {
            let pos = self.frame_positions(h, w);
            let mut cos = Vec::with_capacity(pos.len() * hd / 2);
            let mut sin = Vec::with_capacity(pos.len() * hd / 2);
            for &(r, c) in &pos {
                for coord in [r, c] {
                    for &f in &inv_freq {
                        let angle = (coord as f32 * f) as f64;
                        cos.push(angle.cos());
                        sin.push(angle.sin());
                    }
                }
            }
            let table =
                |v: Vec<f64>| Tensor::from_vec(v, (pos.len(), hd / 2), device)?.to_dtype(dtype);
            let rope = RopeTables::new(table(cos)?, table(sin)?)?;
            for _ in 0..t {
                frames.spans.push((start, h * w));
                frames.rope.push(rope.clone());
                start += h * w;
            }
        }
        Ok(frames)
    }
}

/// `torch.linspace(0, side - 1, steps)` in f32 (the first half counted up from the
/// start, the second down from the end, as torch does).
fn linspace(side: usize, steps: usize) -> Vec<f32> {
    if steps == 1 {
        return vec![0.0];
    }
    let end = (side - 1) as f32;
    let step = end / (steps - 1) as f32;
    (0..steps)
        .map(|i| {
            if i < steps / 2 {
                step * i as f32
            } else {
                end - step * (steps - 1 - i) as f32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
