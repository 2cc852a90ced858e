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
mod tests {
    use super::*;

    fn tiny() -> VisionConfig {
        VisionConfig {
            depth: 2,
            hidden_size: 16,
            intermediate_size: 32,
            num_heads: 2,
            patch_size: 2,
            out_hidden_size: 8,
            num_position_embeddings: 16,
            deepstack_visual_indexes: vec![1],
            ..VisionConfig::default()
        }
    }

    fn model(cfg: &VisionConfig) -> VisionModel {
        let w = VisionModel::random_weights(cfg, 0).unwrap();
        VisionModel::from_weights(cfg, w, DType::F32, &Device::Cpu).unwrap()
    }

    #[test]
    fn reads_vision_config_of_hf_config() {
        let json = r#"{
            "architectures": ["Qwen3VLForConditionalGeneration"],
            "model_type": "qwen3_vl",
            "text_config": {"hidden_size": 2048},
            "vision_config": {
                "deepstack_visual_indexes": [5, 11, 17], "depth": 24,
                "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1024, "in_channels": 3,
                "initializer_range": 0.02, "intermediate_size": 4096,
                "model_type": "qwen3_vl", "num_heads": 16, "num_position_embeddings": 2304,
                "out_hidden_size": 2048, "patch_size": 16, "spatial_merge_size": 2,
                "temporal_patch_size": 2
            }
        }"#;
        let cfg = VisionConfig::from_hf_config(json).unwrap();
        assert_eq!(cfg.depth, 24);
        assert_eq!(cfg.hidden_size, 1024);
        assert_eq!(cfg.out_hidden_size, 2048);
        assert_eq!(cfg.deepstack_visual_indexes, [5, 11, 17]);
        assert_eq!(cfg.head_dim(), 64);
        assert_eq!(cfg.patch_dim(), 3 * 2 * 16 * 16);
        assert_eq!(cfg.mlp_act().unwrap(), Gelu::Tanh);
        // candle-transformers' spelling of the channel count.
        let c: VisionConfig = serde_json::from_str(r#"{"in_chans": 1}"#).unwrap();
        assert_eq!(c.in_channels, 1);
        let err = VisionConfig::from_hf_config(r#"{"text_config": {}}"#).unwrap_err();
        assert!(err.to_string().contains("vision_config"), "{err}");
    }

    #[test]
    fn refuses_configs_it_cannot_build() {
        type Edit = fn(&mut VisionConfig);
        let cases: [(&str, Edit); 6] = [
            ("num_heads", |c| c.num_heads = 3),
            ("multiple of 4", |c| {
                c.hidden_size = 12;
                c.num_heads = 2
            }),
            ("square", |c| c.num_position_embeddings = 15),
            ("depth is 2", |c| c.deepstack_visual_indexes = vec![2]),
            ("twice", |c| c.deepstack_visual_indexes = vec![0, 0]),
            ("hidden_act `relu`", |c| c.hidden_act = "relu".into()),
        ];
        for (want, edit) in cases {
            let mut c = tiny();
            edit(&mut c);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        tiny().validate().unwrap();
    }

    #[test]
    fn loading_names_the_missing_or_misshapen_weight() {
        let cfg = tiny();
        let mut w = VisionModel::random_weights(&cfg, 0).unwrap();
        let name = "model.visual.blocks.1.attn.qkv.weight";
        let qkv = w.remove(name).unwrap();
        let err = VisionModel::from_weights(&cfg, w.clone(), DType::F32, &Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err}");
        w.insert(name.into(), qkv.t().unwrap());
        let err = VisionModel::from_weights(&cfg, w, DType::F32, &Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(err.contains("shape") && err.contains(name), "{err}");
    }

    #[test]
    fn forward_refuses_inconsistent_inputs() {
        let cfg = tiny();
        let m = model(&cfg);
        let rows = |n: usize, w: usize| Tensor::zeros((n, w), DType::F32, &Device::Cpu).unwrap();
        let pd = cfg.patch_dim();
        let err = |px: &Tensor, g: &[[usize; 3]]| m.forward(px, g).unwrap_err().to_string();
        assert!(err(&rows(8, pd), &[[1, 2, 2]]).contains("covers 4 patches"));
        assert!(err(&rows(4, pd + 1), &[[1, 2, 2]]).contains("rows hold"));
        assert!(err(&rows(6, pd), &[[1, 2, 3]]).contains("multiples of spatial_merge_size"));
        assert!(err(&rows(0, pd), &[]).contains("no image"));
        let flat = Tensor::zeros(pd * 4, DType::F32, &Device::Cpu).unwrap();
        assert!(err(&flat, &[[1, 2, 2]]).contains("pixel_values must be"));
        let (e, d) = m.forward(&rows(12, pd), &[[1, 2, 2], [2, 2, 2]]).unwrap();
        assert_eq!(e.dims(), [3, 8]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].dims(), [3, 8]);
    }

    /// The largest absolute value of `t`.
    fn max_abs(t: &Tensor) -> f32 {
        t.abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    /// Random weights scaled to unit size (x25), so small numeric leaks show.
    fn unit_scale_weights(cfg: &VisionConfig, seed: u64) -> HashMap<String, Tensor> {
        VisionModel::random_weights(cfg, seed)
            .unwrap()
            .into_iter()
            .map(|(k, t)| (k, (t * 25.0).unwrap()))
            .collect()
    }

    #[test]
    fn half_precision_follows_f32() {
        let cfg = tiny();
        let w = unit_scale_weights(&cfg, 2);
        let pd = cfg.patch_dim();
        let px = Tensor::arange(0u32, (8 * pd) as u32, &Device::Cpu)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .affine(0.11, 0.0)
            .unwrap()
            .sin()
            .unwrap()
            .reshape((8, pd))
            .unwrap();
        let run = |dtype: DType| {
            let m = VisionModel::from_weights(&cfg, w.clone(), dtype, &Device::Cpu).unwrap();
            let (e, d) = m.forward(&px, &[[1, 2, 4]]).unwrap();
            assert_eq!(e.dtype(), dtype);
            assert_eq!(d[0].dtype(), dtype);
            e.to_dtype(DType::F32).unwrap()
        };
        let full = run(DType::F32);
        let half = run(DType::BF16);
        let scale = max_abs(&full);
        let diff = max_abs(&(half - &full).unwrap());
        // bf16 keeps 8 bits of mantissa: a few percent of the output scale after two
        // blocks and a merger.
        eprintln!("bf16 vs f32: max |diff| {diff:.3e} at output scale {scale:.3}");
        assert!(scale > 1.0, "{scale}");
        assert!(diff < 0.05 * scale, "bf16 off by {diff} at scale {scale}");
    }

    #[test]
    fn linspace_is_symmetric_like_torch() {
        assert_eq!(linspace(48, 1), [0.0]);
        let v = linspace(48, 7);
        assert_eq!(v.len(), 7);
        assert_eq!((v[0], v[6]), (0.0, 47.0));
        for (i, x) in v.iter().enumerate() {
            assert!((x - i as f32 * 47.0 / 6.0).abs() < 1e-5);
        }
    }

    #[test]
    fn frames_attend_only_within_themselves() {
        // A second frame changes none of the first frame's tokens. Weights at unit
        // scale (x25), so leaking attention would move them well above the tolerance.
        let cfg = tiny();
        let w = unit_scale_weights(&cfg, 0);
        let m = VisionModel::from_weights(&cfg, w, DType::F32, &Device::Cpu).unwrap();
        let pd = cfg.patch_dim();
        let wave = |phase: f64| {
            let t = Tensor::arange(0u32, (8 * pd) as u32, &Device::Cpu).unwrap();
            let t = t.to_dtype(DType::F32).unwrap().affine(0.37, phase).unwrap();
            t.sin().unwrap().reshape((8, pd)).unwrap()
        };
        let (a, b) = (wave(0.0), wave(1.0));
        let (one, _) = m.forward(&a, &[[1, 2, 4]]).unwrap();
        let ab = Tensor::cat(&[&a, &b], 0).unwrap();
        let (two, _) = m.forward(&ab, &[[2, 2, 4]]).unwrap();
        assert_eq!(two.dims(), [4, 8]);
        let diff = max_abs(&(two.narrow(0, 0, 2).unwrap() - &one).unwrap());
        assert!(diff < 1e-6, "{diff}");
        let other = max_abs(&(two.narrow(0, 2, 2).unwrap() - &one).unwrap());
        assert!(
            other > 1e-4,
            "the second frame's tokens are its own ({other})"
        );
    }
}
