//! The vision tower's configuration: HF `vision_config` fields, their checks, the
//! tower's weight names and shapes, and its GELU variants.

use candle_core::{Result, Tensor};
use serde::{Deserialize, Serialize};

/// The `vision_config` of an HF Qwen3-VL `config.json`; missing fields take
/// transformers' `Qwen3VLVisionConfig` defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VisionConfig {
    /// Number of transformer blocks.
    pub depth: usize,
    /// Width of the blocks.
    pub hidden_size: usize,
    /// Width of the blocks' MLP.
    pub intermediate_size: usize,
    /// Attention heads per block.
    pub num_heads: usize,
    /// Side of a square patch in pixels.
    pub patch_size: usize,
    /// Frames per temporal patch.
    pub temporal_patch_size: usize,
    /// Side of the block of patches merged into one output token.
    pub spatial_merge_size: usize,
    /// Image channels (`in_chans` in candle-transformers' spelling).
    #[serde(alias = "in_chans")]
    pub in_channels: usize,
    /// Width of the output tokens (the language model's hidden size).
    pub out_hidden_size: usize,
    /// Learned position embeddings, a square number (their grid's side squared).
    pub num_position_embeddings: usize,
    /// Blocks whose outputs feed a DeepStack merger, in merger order.
    pub deepstack_visual_indexes: Vec<usize>,
    /// Activation of the blocks' MLP: `gelu_pytorch_tanh` (Qwen3-VL) or `gelu`.
    pub hidden_act: String,
}

impl Default for VisionConfig {
    fn default() -> Self {
        VisionConfig {
            depth: 27,
            hidden_size: 1152,
            intermediate_size: 4304,
            num_heads: 16,
            patch_size: 16,
            temporal_patch_size: 2,
            spatial_merge_size: 2,
            in_channels: 3,
            out_hidden_size: 3584,
            num_position_embeddings: 2304,
            deepstack_visual_indexes: vec![8, 16, 24],
            hidden_act: "gelu_pytorch_tanh".into(),
        }
    }
}

impl VisionConfig {
    /// The `vision_config` object of a whole HF Qwen3-VL `config.json`.
    pub fn from_hf_config(text: &str) -> anyhow::Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let vc = v
            .get("vision_config")
            .ok_or_else(|| anyhow::anyhow!("config has no `vision_config`"))?;
        let cfg: VisionConfig = serde_json::from_value(vc.clone())
            .map_err(|e| anyhow::anyhow!("`vision_config`: {e}"))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Per-head width.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads.max(1)
    }

    /// Values per patch row of `pixel_values`: `in_channels * temporal * patch²`.
    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// Patches merged into one output token, `spatial_merge_size²`.
    pub fn merge_unit(&self) -> usize {
        self.spatial_merge_size * self.spatial_merge_size
    }

    /// Side of the learned position-embedding grid.
    pub(super) fn grid_side(&self) -> usize {
        (self.num_position_embeddings as f64).sqrt().round() as usize
    }

    /// The MLP activation named by `hidden_act`.
    pub fn mlp_act(&self) -> Result<Gelu> {
        match self.hidden_act.as_str() {
            "gelu_pytorch_tanh" | "gelu_new" => Ok(Gelu::Tanh),
            "gelu" => Ok(Gelu::Erf),
            other => candle_core::bail!(
                "vision_config.hidden_act `{other}` is not supported (gelu_pytorch_tanh, gelu_new, gelu)"
            ),
        }
    }

    /// Refuses sizes the tower cannot be built with, naming the field.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("depth", self.depth),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_heads", self.num_heads),
            ("patch_size", self.patch_size),
            ("temporal_patch_size", self.temporal_patch_size),
            ("spatial_merge_size", self.spatial_merge_size),
            ("in_channels", self.in_channels),
            ("out_hidden_size", self.out_hidden_size),
            ("num_position_embeddings", self.num_position_embeddings),
        ];
        for (name, v) in positive {
            if v == 0 {
                candle_core::bail!("vision_config.{name} must be positive");
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_heads) {
            candle_core::bail!(
                "vision_config.hidden_size {} is not divisible by num_heads {}",
                self.hidden_size,
                self.num_heads
            );
        }
        if !self.head_dim().is_multiple_of(4) {
            candle_core::bail!(
                "vision head width {} must be a multiple of 4 (2-D rotary embedding)",
                self.head_dim()
            );
        }
        let side = self.grid_side();
        if side * side != self.num_position_embeddings || u32::try_from(side * side).is_err() {
            candle_core::bail!(
                "vision_config.num_position_embeddings {} is not a square number below 2^32",
                self.num_position_embeddings
            );
        }
        if let Some(&i) = self
            .deepstack_visual_indexes
            .iter()
            .find(|&&i| i >= self.depth)
        {
            candle_core::bail!(
                "vision_config.deepstack_visual_indexes names block {i}, but depth is {}",
                self.depth
            );
        }
        let mut seen = self.deepstack_visual_indexes.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            candle_core::bail!(
                "vision_config.deepstack_visual_indexes {:?} names a block twice",
                self.deepstack_visual_indexes
            );
        }
        self.mlp_act()?;
        Ok(())
    }

    /// Every weight of the tower with its shape, HF names relative to
    /// [`VISUAL_PREFIX`](super::VISUAL_PREFIX).
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, inter) = (self.hidden_size, self.intermediate_size);
        let merged = h * self.merge_unit();
        let (t, p) = (self.temporal_patch_size, self.patch_size);
        let mut v: Vec<(String, Vec<usize>)> = vec![
            (
                "patch_embed.proj.weight".into(),
                vec![h, self.in_channels, t, p, p],
            ),
            ("patch_embed.proj.bias".into(), vec![h]),
            (
                "pos_embed.weight".into(),
                vec![self.num_position_embeddings, h],
            ),
        ];
        let lin = |v: &mut Vec<_>, name: String, out: usize, inp: usize| {
            v.push((format!("{name}.weight"), vec![out, inp]));
            v.push((format!("{name}.bias"), vec![out]));
        };
        let norm = |v: &mut Vec<_>, name: String, dim: usize| {
            v.push((format!("{name}.weight"), vec![dim]));
            v.push((format!("{name}.bias"), vec![dim]));
        };
        for i in 0..self.depth {
            let b = format!("blocks.{i}");
            norm(&mut v, format!("{b}.norm1"), h);
            norm(&mut v, format!("{b}.norm2"), h);
            lin(&mut v, format!("{b}.attn.qkv"), 3 * h, h);
            lin(&mut v, format!("{b}.attn.proj"), h, h);
            lin(&mut v, format!("{b}.mlp.linear_fc1"), inter, h);
            lin(&mut v, format!("{b}.mlp.linear_fc2"), h, inter);
        }
        let mergers = std::iter::once(("merger".to_string(), h)).chain(
            (0..self.deepstack_visual_indexes.len())
                .map(|j| (format!("deepstack_merger_list.{j}"), merged)),
        );
        for (m, norm_dim) in mergers {
            norm(&mut v, format!("{m}.norm"), norm_dim);
            lin(&mut v, format!("{m}.linear_fc1"), merged, merged);
            lin(
                &mut v,
                format!("{m}.linear_fc2"),
                self.out_hidden_size,
                merged,
            );
        }
        v
    }
}

/// GELU variants: the tanh approximation (`gelu_pytorch_tanh`) or the exact erf form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gelu {
    /// `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.
    Tanh,
    /// `0.5 x (1 + erf(x / sqrt 2))`.
    Erf,
}

impl Gelu {
    pub(super) fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Gelu::Tanh => x.gelu(),
            Gelu::Erf => x.gelu_erf(),
        }
    }
}
