//! Qwen3-VL's multimodal rotary positions (M-RoPE).
//!
//! Follows Hugging Face transformers (`modeling_qwen3_vl.py`):
//!
//! - [`rope_index`] is `Qwen3VLModel.get_rope_index` for text and images: every token
//!   gets a (temporal, height, width) position. Text tokens have all three equal, one
//!   more than the largest position before them; the `t·(h/m)·(w/m)` placeholder tokens
//!   of an image (its grid after the spatial merge `m`, row-major) get
//!   `start + (ti, hi, wi)`, `start` being the position the first of them would have
//!   had as text. After the prompt, decoding continues at `index + delta` on all three
//!   axes, `delta = max + 1 − len`.
//! - [`MropeLayout`] is `Qwen3VLTextRotaryEmbedding`: each of the `head_dim / 2`
//!   rotary frequencies takes its angle from one axis. Interleaved (Qwen3-VL,
//!   `mrope_interleaved`): frequency `j` is height when `j % 3 == 1` and
//!   `j < 3·section[1]`, width when `j % 3 == 2` and `j < 3·section[2]`, temporal
//!   otherwise; chunked (Qwen2-VL): the first `section[0]` temporal, the next
//!   `section[1]` height, the rest width. cos/sin then apply in the rotate-half layout
//!   as plain RoPE, so text-only positions give plain 1-D RoPE exactly.
//!
//! Videos (timestamps between frames) are not handled.

use crate::model::fused::RopeTables;
use candle_core::{DType, Device, Result, Tensor};

/// The special tokens of a Qwen3-VL prompt's images (`config.json` top level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlTokenIds {
    /// Placeholder repeated once per merged image token (`<|image_pad|>`).
    pub image_token_id: u32,
    /// Opens an image or video (`<|vision_start|>`).
    pub vision_start_token_id: u32,
}

impl VlTokenIds {
    /// The ids named at the top of a whole HF Qwen3-VL `config.json`.
    pub fn from_hf_config(text: &str) -> anyhow::Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let id = |key: &str| -> anyhow::Result<u32> {
            v.get(key)
                .and_then(|x| x.as_u64())
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| anyhow::anyhow!("config has no token id `{key}`"))
        };
        Ok(VlTokenIds {
            image_token_id: id("image_token_id")?,
            vision_start_token_id: id("vision_start_token_id")?,
        })
    }
}

/// (temporal, height, width) rotary positions of one sequence, and where decoding
/// continues after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MropePositions {
    /// One `[t, h, w]` per token.
    pub positions: Vec<[u32; 3]>,
    /// Position of the token after token `i` minus `i` (`max + 1 − len`, ≤ 0).
    pub delta: i64,
}

impl MropePositions {
    /// Text-only positions `start .. start + len` on all three axes.
    pub fn text(start: u32, len: usize) -> Result<Self> {
        let positions = (0..len)
            .map(|i| {
                let p = u32::try_from(i)
                    .ok()
                    .and_then(|i| start.checked_add(i))
                    .ok_or_else(|| candle_core::Error::Msg("rotary position overflows".into()))?;
                Ok([p; 3])
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MropePositions {
            positions,
            delta: 0,
        })
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

/// Merged tokens of an image of `grid_thw` patches: `(t, h / m, w / m)`.
fn llm_grid([t, h, w]: [usize; 3], merge: usize, i: usize) -> Result<[usize; 3]> {
    if t == 0
        || h == 0
        || w == 0
        || merge == 0
        || !h.is_multiple_of(merge)
        || !w.is_multiple_of(merge)
    {
        candle_core::bail!(
            "image {i}: grid [{t}, {h}, {w}] is not positive multiples of spatial_merge_size {merge}"
        );
    }
    Ok([t, h / merge, w / merge])
}

/// The rotary positions of `tokens` holding the placeholder runs of the images whose
/// patch grids are `image_grid_thw` (in order), as transformers' `get_rope_index`.
///
/// Every image's run must be `t·(h/m)·(w/m)` consecutive image tokens right after a
/// `vision_start` token, and there must be exactly as many runs as grids.
pub fn rope_index(
    tokens: &[u32],
    image_grid_thw: &[[usize; 3]],
    ids: &VlTokenIds,
    spatial_merge_size: usize,
) -> Result<MropePositions> {
    let mut positions: Vec<[u32; 3]> = Vec::with_capacity(tokens.len());
    // One more than the largest position so far.
    let mut next: u32 = 0;
    let mut st = 0usize;
    let mut images = image_grid_thw.iter().enumerate();
    let too_long = || candle_core::Error::Msg("sequence too long for u32 positions".into());
    while st < tokens.len() {
        let ed = tokens[st..]
            .iter()
            .position(|&t| t == ids.image_token_id)
            .map_or(tokens.len(), |p| st + p);
        for _ in st..ed {
            positions.push([next; 3]);
            next = next.checked_add(1).ok_or_else(too_long)?;
        }
        if ed == tokens.len() {
            break;
        }
        let Some((i, &grid)) = images.next() else {
            candle_core::bail!(
                "token {ed} is an image placeholder beyond the {} image(s) given",
                image_grid_thw.len()
            );
        };
        if ed == 0 || tokens[ed - 1] != ids.vision_start_token_id {
            candle_core::bail!(
                "image {i}: its placeholder run at token {ed} does not follow a vision_start token"
            );
        }
        let [gt, gh, gw] = llm_grid(grid, spatial_merge_size, i)?;
        let n = gt * gh * gw;
        let run = tokens[ed..]
            .iter()
            .take_while(|&&t| t == ids.image_token_id)
            .count();
        if run != n {
            candle_core::bail!(
                "image {i}: grid {grid:?} makes {n} placeholder tokens, the prompt has {run} at token {ed}"
            );
        }
        let start = next;
        let at = |k: usize| {
            u32::try_from(k)
                .ok()
                .and_then(|k| start.checked_add(k))
                .ok_or_else(too_long)
        };
        for ti in 0..gt {
            for hi in 0..gh {
                for wi in 0..gw {
                    positions.push([at(ti)?, at(hi)?, at(wi)?]);
                }
            }
        }
        next = at(gt.max(gh).max(gw))?;
        st = ed + n;
    }
    if let Some((i, _)) = images.next() {
        candle_core::bail!(
            "{} image(s) given, the prompt has placeholders for {i}",
            image_grid_thw.len()
        );
    }
    let delta = i64::from(next) - tokens.len() as i64;
    Ok(MropePositions { positions, delta })
}

/// Which position axis each rotary frequency reads (`rope_scaling.mrope_section`,
/// `mrope_interleaved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MropeLayout {
    /// Frequencies per axis (temporal, height, width); they sum to `head_dim / 2`.
    pub section: [usize; 3],
    /// Qwen3-VL's interleaved layout (else Qwen2-VL's consecutive chunks).
    pub interleaved: bool,
}

impl MropeLayout {
    /// Qwen3-VL's layout for `section`.
    pub fn interleaved(section: [usize; 3]) -> Self {
        MropeLayout {
            section,
            interleaved: true,
        }
    }

    /// The axis (0 temporal, 1 height, 2 width) of every frequency of a `half`-wide
    /// rotary table, refusing sections that do not cover it axis by axis.
    pub fn axes(&self, half: usize) -> Result<Vec<usize>> {
        let s = self.section;
        let axes: Vec<usize> = (0..half)
            .map(|j| {
                if self.interleaved {
                    match j % 3 {
                        1 if j < 3 * s[1] => 1,
                        2 if j < 3 * s[2] => 2,
                        _ => 0,
                    }
                } else if j < s[0] {
                    0
                } else if j < s[0] + s[1] {
                    1
                } else {
                    2
                }
            })
            .collect();
        let counts = [0, 1, 2].map(|a| axes.iter().filter(|&&x| x == a).count());
        if s.iter().sum::<usize>() != half || counts != s {
            candle_core::bail!(
                "mrope_section {s:?} does not lay out {half} rotary frequencies (head_dim / 2) \
                 {} (it gives {counts:?})",
                if self.interleaved {
                    "interleaved"
                } else {
                    "in chunks"
                }
            );
        }
        Ok(axes)
    }

    /// Rotary tables of `positions` for inverse frequencies `inv_freq`
    /// (`head_dim / 2`), cos and sin multiplied by `attention_factor`: frequency `j` of
    /// position `p` turns by `p[axis(j)] · inv_freq[j]` (in f32, as transformers).
    pub fn tables(
        &self,
        positions: &[[u32; 3]],
        inv_freq: &[f32],
        attention_factor: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<RopeTables> {
        let half = inv_freq.len();
        let axes = self.axes(half)?;
        let angles: Vec<f32> = positions
            .iter()
            .flat_map(|p| {
                axes.iter()
                    .zip(inv_freq)
                    .map(move |(&a, &f)| p[a] as f32 * f)
            })
            .collect();
        let f = Tensor::from_vec(angles, (positions.len(), half), device)?;
        let (cos, sin) = if attention_factor == 1.0 {
            (f.cos()?, f.sin()?)
        } else {
            (
                (f.cos()? * attention_factor)?,
                (f.sin()? * attention_factor)?,
            )
        };
        RopeTables::new(cos.to_dtype(dtype)?, sin.to_dtype(dtype)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: VlTokenIds = VlTokenIds {
        image_token_id: 9,
        vision_start_token_id: 8,
    };

    /// Written out by hand from `get_rope_index`: two text tokens, an image of grid
    /// [1, 4, 6] (2 x 3 merged tokens), two text tokens, a two-frame image of grid
    /// [2, 2, 2] (2 x 1 x 1 tokens), one text token.
    #[test]
    fn rope_index_follows_transformers() {
        let mut tokens = vec![5, 8];
        tokens.extend([9; 6]);
        tokens.extend([7, 8]);
        tokens.extend([9; 2]);
        tokens.push(6);
        let got = rope_index(&tokens, &[[1, 4, 6], [2, 2, 2]], &IDS, 2).unwrap();
        let want: Vec<[u32; 3]> = vec![
            [0, 0, 0],
            [1, 1, 1],
            // image 0 starts at 2: t 0, h 0..2, w 0..3
            [2, 2, 2],
            [2, 2, 3],
            [2, 2, 4],
            [2, 3, 2],
            [2, 3, 3],
            [2, 3, 4],
            // text resumes after the largest position 4
            [5, 5, 5],
            [6, 6, 6],
            // image 1 starts at 7: t 0..2, h 0, w 0
            [7, 7, 7],
            [8, 7, 7],
            [9, 9, 9],
        ];
        assert_eq!(got.positions, want);
        assert_eq!(got.delta, 10 - 13);
        let plain = rope_index(&[1, 2, 3], &[], &IDS, 2).unwrap();
        assert_eq!(plain, MropePositions::text(0, 3).unwrap());
    }

    #[test]
    fn token_ids_come_from_the_config() {
        let ids = VlTokenIds::from_hf_config(
            r#"{"image_token_id": 151655, "vision_start_token_id": 151652}"#,
        )
        .unwrap();
        assert_eq!(
            (ids.image_token_id, ids.vision_start_token_id),
            (151655, 151652)
        );
        let e = VlTokenIds::from_hf_config(r#"{"image_token_id": 1}"#).unwrap_err();
        assert!(e.to_string().contains("vision_start_token_id"), "{e}");
    }

    #[test]
    fn rope_index_refuses_mismatched_images() {
        let err = |tokens: &[u32], grids: &[[usize; 3]]| {
            rope_index(tokens, grids, &IDS, 2).unwrap_err().to_string()
        };
        assert!(err(&[8, 9, 9, 9], &[[1, 2, 2]]).contains("makes 1 placeholder"));
        assert!(err(&[8, 9], &[]).contains("beyond the 0 image"));
        assert!(err(&[8, 9], &[[1, 2, 2], [1, 2, 2]]).contains("placeholders for 1"));
        assert!(err(&[1, 9], &[[1, 2, 2]]).contains("vision_start"));
        assert!(err(&[8, 9], &[[1, 3, 2]]).contains("spatial_merge_size"));
    }

    #[test]
    fn layouts_assign_frequencies_to_axes() {
        // Qwen3-VL's [24, 20, 20] over 64 frequencies: THW repeated, then 4 temporal.
        let axes = MropeLayout::interleaved([24, 20, 20]).axes(64).unwrap();
        for (j, &a) in axes.iter().enumerate() {
            let want = if j >= 60 { 0 } else { j % 3 };
            assert_eq!(a, want, "frequency {j}");
        }
        let chunked = MropeLayout {
            section: [2, 1, 1],
            interleaved: false,
        };
        assert_eq!(chunked.axes(4).unwrap(), [0, 0, 1, 2]);
        assert!(MropeLayout::interleaved([2, 2, 2]).axes(8).is_err());
        // Height slots would run past the table.
        assert!(MropeLayout::interleaved([1, 3, 2]).axes(6).is_err());
    }

    #[test]
    fn tables_take_each_frequency_from_its_axis() {
        let layout = MropeLayout::interleaved([2, 2, 2]);
        let inv: Vec<f32> = (0..6).map(|j| 1.0 / 3f32.powi(j)).collect();
        let pos = [[3u32, 5, 11], [0, 0, 0]];
        let t = layout
            .tables(&pos, &inv, 1.0, DType::F64, &Device::Cpu)
            .unwrap();
        // Rotating the unit vector e_j (and e_{j+half}) reads cos/sin of frequency j.
        let x = Tensor::eye(12, DType::F64, &Device::Cpu)
            .unwrap()
            .reshape((1, 12, 1, 12))
            .unwrap();
        let x = Tensor::cat(&[&x, &x], 2).unwrap(); // positions 0 and 1
        let y = crate::model::fused::rope(&x, &t)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec3::<f64>()
            .unwrap();
        for j in 0..6 {
            let axis = [0, 1, 2, 0, 1, 2][j];
            let angle = f64::from(pos[0][axis] as f32 * inv[j]);
            assert!((y[j][0][j] - angle.cos()).abs() < 1e-6, "cos {j}");
            assert!((y[j][0][j + 6] - angle.sin()).abs() < 1e-6, "sin {j}");
            assert!((y[j][1][j] - 1.0).abs() < 1e-12, "position 0 turns nothing");
        }
    }
}
