//! Qwen3-VL (and Qwen2-VL) image preprocessing: the pixels the vision tower reads.
//!
//! Follows Hugging Face transformers' *slow* `Qwen2VLImageProcessor` (the one Qwen3-VL
//! shares), step by step:
//!
//! 1. convert to RGB (alpha dropped, grey replicated, like PIL's `convert("RGB")`);
//! 2. [`smart_resize`] picks a size divisible by `patch_size * merge_size` with
//!    `min_pixels <= h * w <= max_pixels`, and the image is resized to it with bicubic
//!    resampling;
//! 3. rescale by `rescale_factor` (1/255; computed in f64, stored as f32), then normalize
//!    `(x - mean) / std` in f32;
//! 4. the single frame is repeated to `temporal_patch_size` frames and cut into patches
//!    in transformers' order: rows `(t, h / merge, w / merge, merge_h, merge_w)`, columns
//!    `(channel, temporal, patch_h, patch_w)`.
//!
//! **Equal to transformers** (checked against `tests/data/vl/`, made by
//! `scripts/vl/make_preprocess_fixture.py` with transformers 4.57 and Pillow 13): the
//! resized size and `grid_thw` exactly, and the pixel values bit for bit on 8-bit RGB,
//! RGBA and grey images. The bicubic resize (`bicubic`) follows PIL's resampling
//! arithmetic: Keys' cubic with a = -0.5, support widened by the scale when shrinking,
//! each window's weights normalized and rounded to 22-bit fixed point, two separable
//! passes each rounded to u8, in Pillow 13's order (vertical first only when the height
//! loses more than twice as many pixels as the width). The `image` crate's CatmullRom
//! resize is the same kernel but not the same arithmetic (f32 weights and
//! intermediate, vertical pass first), so it is not used.
//!
//! **Not equal**: with Pillow 12 or older (always horizontal first) a resize whose
//! height shrinks much more than its width can differ by a few u8 steps in some pixels;
//! transformers' *fast* processor (`Qwen2VLImageProcessorFast`, named by
//! Qwen3-VL's config) resizes with torchvision rather than PIL and so differs from both
//! by small amounts; 16-bit and float images are scaled to 8 bits by the `image` crate
//! where PIL would clip them; video (several frames) is not handled; a `size` dict is
//! honoured here although the slow processor's constructor drops it (its `preprocess`
//! and the fast processor honour it); configurations with `do_resize`,
//! `do_rescale`, `do_normalize` or `do_convert_rgb` false, or a resampling filter other
//! than bicubic, are refused; `min_pixels > max_pixels` is refused; sizes beyond 2^53
//! pixels may round differently from Python's exact integer division.

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::path::Path;

/// The paper's cap on image size: at most 262,144 pixels (512 x 512) per screenshot.
pub const PAPER_MAX_PIXELS: usize = 262_144;

/// The image settings file of an HF model folder.
const PREPROCESSOR_FILE: &str = "preprocessor_config.json";

/// Largest accepted ratio of the long to the short side (transformers' limit).
pub const MAX_ASPECT_RATIO: f64 = 200.0;

/// Target `(height, width)` for an image: both multiples of `factor`, the aspect ratio
/// kept as well as possible, scaled down (floor) above `max_pixels` and up (ceil) below
/// `min_pixels`, as transformers' `smart_resize`.
///
/// Errors on zero sizes or factor, on an aspect ratio above 200, and where the result
/// would have a zero side (only possible with `min_pixels == 0`).
pub fn smart_resize(
    height: usize,
    width: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> Result<(usize, usize)> {
    ensure!(
        height > 0 && width > 0,
        "image size {height}x{width} (height x width) has a zero side"
    );
    ensure!(factor > 0, "resize factor must be positive");
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    let ratio = h.max(w) / h.min(w);
    ensure!(
        ratio <= MAX_ASPECT_RATIO,
        "image {height}x{width} (height x width) has aspect ratio {ratio:.1}, above the limit of {MAX_ASPECT_RATIO}"
    );
    // Python's round() rounds halves to even.
    let mut h_bar = (h / f).round_ties_even() as u128 * factor as u128;
    let mut w_bar = (w / f).round_ties_even() as u128 * factor as u128;
    let area = h_bar * w_bar;
    if area > max_pixels as u128 {
        let beta = ((height as u128 * width as u128) as f64 / max_pixels as f64).sqrt();
        h_bar = (factor as u128).max((h / beta / f).floor() as u128 * factor as u128);
        w_bar = (factor as u128).max((w / beta / f).floor() as u128 * factor as u128);
    } else if area < min_pixels as u128 {
        let beta = (min_pixels as f64 / (height as u128 * width as u128) as f64).sqrt();
        h_bar = (h * beta / f).ceil() as u128 * factor as u128;
        w_bar = (w * beta / f).ceil() as u128 * factor as u128;
    }
    ensure!(
        h_bar > 0 && w_bar > 0,
        "image {height}x{width} rounds to a zero side at factor {factor} (min_pixels is 0)"
    );
    let out_h = usize::try_from(h_bar).context("resized height does not fit in usize")?;
    let out_w = usize::try_from(w_bar).context("resized width does not fit in usize")?;
    Ok((out_h, out_w))
}

/// Image preprocessing settings, as in an HF `preprocessor_config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct VlImageConfig {
    /// Side of one vision patch in pixels (Qwen3-VL: 16).
    pub patch_size: usize,
    /// Frames per temporal patch; a still image is repeated this often (2).
    pub temporal_patch_size: usize,
    /// Side of the block of patches merged into one language-model token (2).
    pub merge_size: usize,
    /// Lower bound on resized height x width.
    pub min_pixels: usize,
    /// Upper bound on resized height x width.
    pub max_pixels: usize,
    /// Per-channel (RGB) mean subtracted after rescaling.
    pub image_mean: [f32; 3],
    /// Per-channel (RGB) standard deviation divided by after subtracting the mean.
    pub image_std: [f32; 3],
    /// Multiplies raw u8 values (1/255).
    pub rescale_factor: f64,
}

impl Default for VlImageConfig {
    fn default() -> Self {
        Self::qwen3_vl()
    }
}

/// `image_mean` / `image_std` in JSON: one number for all channels or one per channel.
#[derive(Deserialize)]
#[serde(untagged)]
enum PerChannel {
    One(f64),
    Each(Vec<f64>),
}

#[derive(Deserialize)]
struct SizeJson {
    shortest_edge: Option<u64>,
    longest_edge: Option<u64>,
}

/// The keys of `preprocessor_config.json` this module reads; all others are ignored.
#[derive(Deserialize)]
struct ConfigJson {
    patch_size: Option<usize>,
    temporal_patch_size: Option<usize>,
    merge_size: Option<usize>,
    min_pixels: Option<u64>,
    max_pixels: Option<u64>,
    size: Option<SizeJson>,
    image_mean: Option<PerChannel>,
    image_std: Option<PerChannel>,
    rescale_factor: Option<f64>,
    do_resize: Option<bool>,
    do_rescale: Option<bool>,
    do_normalize: Option<bool>,
    do_convert_rgb: Option<bool>,
    resample: Option<i64>,
}

/// PIL's code for bicubic resampling (`PIL.Image.Resampling.BICUBIC`).
const PIL_BICUBIC: i64 = 3;

fn per_channel(v: PerChannel, key: &str) -> Result<[f32; 3]> {
    let each = match v {
        PerChannel::One(x) => vec![x; 3],
        PerChannel::Each(xs) => xs,
    };
    ensure!(
        each.len() == 3,
        "`{key}` has {} values; an RGB image needs 3 (or one for all)",
        each.len()
    );
    // Through f64 first, like numpy's float32 array built from Python floats.
    Ok([each[0] as f32, each[1] as f32, each[2] as f32])
}

fn pixels(v: u64, key: &str) -> Result<usize> {
    usize::try_from(v).with_context(|| format!("`{key}` = {v} does not fit in usize"))
}

impl VlImageConfig {
    /// Qwen3-VL's settings: patch 16, temporal 2, merge 2, mean/std 0.5, rescale 1/255,
    /// and the released checkpoints' pixel range (65,536 to 16,777,216).
    pub fn qwen3_vl() -> Self {
        Self {
            patch_size: 16,
            temporal_patch_size: 2,
            merge_size: 2,
            min_pixels: 65_536,
            max_pixels: 16_777_216,
            image_mean: [0.5; 3],
            image_std: [0.5; 3],
            rescale_factor: 1.0 / 255.0,
        }
    }

    /// Qwen3-VL's settings with the paper's cap, `max_pixels` = [`PAPER_MAX_PIXELS`].
    pub fn qwen3_vl_paper() -> Self {
        Self {
            max_pixels: PAPER_MAX_PIXELS,
            ..Self::qwen3_vl()
        }
    }

    /// `patch_size * merge_size`: resized sides are multiples of it.
    pub fn factor(&self) -> usize {
        self.patch_size.saturating_mul(self.merge_size)
    }

    /// Values per row of `pixel_values`: `3 * temporal_patch_size * patch_size²`.
    pub fn patch_dim(&self) -> usize {
        (3 * self.temporal_patch_size)
            .saturating_mul(self.patch_size)
            .saturating_mul(self.patch_size)
    }

    /// Parses the text of a `preprocessor_config.json`.
    ///
    /// Limits come from `min_pixels` / `max_pixels` or from `size: {shortest_edge,
    /// longest_edge}`; as in transformers, the former override the latter. Missing keys
    /// take Qwen3-VL's values ([`Self::qwen3_vl`]); keys this module does not use are
    /// ignored; settings it cannot honour (a `do_*` flag false, a filter other than
    /// bicubic) are errors.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text).context("not valid JSON")?;
        ensure!(
            value.is_object(),
            "a preprocessor config must be a JSON object"
        );
        let raw: ConfigJson = serde_path_to_error::deserialize(value)
            .map_err(|e| anyhow::anyhow!("field `{}`: {}", e.path(), e.inner()))?;
        for (key, flag) in [
            ("do_resize", raw.do_resize),
            ("do_rescale", raw.do_rescale),
            ("do_normalize", raw.do_normalize),
            ("do_convert_rgb", raw.do_convert_rgb),
        ] {
            ensure!(
                flag != Some(false),
                "`{key}` is false; only the full preprocessing is supported"
            );
        }
        if let Some(r) = raw.resample {
            ensure!(
                r == PIL_BICUBIC,
                "`resample` is {r}; only bicubic ({PIL_BICUBIC}) is supported"
            );
        }
        let mut cfg = Self::qwen3_vl();
        if let Some(size) = raw.size {
            match (size.shortest_edge, size.longest_edge) {
                (Some(lo), Some(hi)) => {
                    cfg.min_pixels = pixels(lo, "size.shortest_edge")?;
                    cfg.max_pixels = pixels(hi, "size.longest_edge")?;
                }
                _ => {
                    bail!("`size` must have both `shortest_edge` and `longest_edge` (pixel counts)")
                }
            }
        }
        if let Some(v) = raw.min_pixels {
            cfg.min_pixels = pixels(v, "min_pixels")?;
        }
        if let Some(v) = raw.max_pixels {
            cfg.max_pixels = pixels(v, "max_pixels")?;
        }
        if let Some(v) = raw.patch_size {
            cfg.patch_size = v;
        }
        if let Some(v) = raw.temporal_patch_size {
            cfg.temporal_patch_size = v;
        }
        if let Some(v) = raw.merge_size {
            cfg.merge_size = v;
        }
        if let Some(v) = raw.image_mean {
            cfg.image_mean = per_channel(v, "image_mean")?;
        }
        if let Some(v) = raw.image_std {
            cfg.image_std = per_channel(v, "image_std")?;
        }
        if let Some(v) = raw.rescale_factor {
            cfg.rescale_factor = v;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and checks a `preprocessor_config.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_json_str(&text)
            .with_context(|| format!("{}: invalid image preprocessor config", path.display()))
    }

    /// The `preprocessor_config.json` transformers' Qwen3-VL image processor reads
    /// back to these settings (and [`Self::from_json_str`] too).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "do_resize": true,
            "do_rescale": true,
            "do_normalize": true,
            "do_convert_rgb": true,
            "patch_size": self.patch_size,
            "temporal_patch_size": self.temporal_patch_size,
            "merge_size": self.merge_size,
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            "size": {"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels},
            "image_mean": self.image_mean,
            "image_std": self.image_std,
            "rescale_factor": self.rescale_factor,
        })
    }

    /// The `preprocessor_config.json` of a model or checkpoint folder, if it has one.
    pub fn of_model_dir(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(PREPROCESSOR_FILE);
        path.is_file().then(|| Self::from_file(&path)).transpose()
    }

    /// Writes `preprocessor_config.json` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(PREPROCESSOR_FILE);
        let text = serde_json::to_string_pretty(&self.to_json())?;
        crate::util::fs::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Rejects settings that cannot produce pixels (zero sizes, zero std, bad limits).
    pub fn validate(&self) -> Result<()> {
        ensure!(self.patch_size > 0, "patch_size must be positive");
        ensure!(
            self.temporal_patch_size > 0,
            "temporal_patch_size must be positive"
        );
        ensure!(self.merge_size > 0, "merge_size must be positive");
        ensure!(
            self.patch_size.checked_mul(self.merge_size).is_some()
                && (self.patch_size as u128).pow(2) * self.temporal_patch_size as u128 * 3
                    <= usize::MAX as u128,
            "patch_size {} is too large",
            self.patch_size
        );
        ensure!(self.max_pixels > 0, "max_pixels must be positive");
        ensure!(
            self.min_pixels <= self.max_pixels,
            "min_pixels ({}) is above max_pixels ({})",
            self.min_pixels,
            self.max_pixels
        );
        for c in 0..3 {
            ensure!(
                self.image_mean[c].is_finite(),
                "image_mean[{c}] is not finite"
            );
            ensure!(
                self.image_std[c].is_finite() && self.image_std[c] != 0.0,
                "image_std[{c}] must be finite and non-zero"
            );
        }
        ensure!(
            self.rescale_factor.is_finite() && self.rescale_factor > 0.0,
            "rescale_factor must be finite and positive"
        );
        Ok(())
    }
}

/// One preprocessed image: the vision tower's input and its patch grid.
#[derive(Debug, Clone, PartialEq)]
pub struct VlPixels {
    /// Row-major `[grid_t * grid_h * grid_w, 3 * temporal_patch_size * patch_size²]`.
    pub pixel_values: Vec<f32>,
    /// Patches along time, height and width.
    pub grid_thw: [usize; 3],
    /// Size the image was resized to, `(height, width)`.
    pub resized_hw: (usize, usize),
    /// Merge size of the config that made these pixels.
    pub merge_size: usize,
}

impl VlPixels {
    /// Number of patch rows, `grid_t * grid_h * grid_w`.
    pub fn rows(&self) -> usize {
        self.grid_thw.iter().product()
    }

    /// Values per row.
    pub fn row_len(&self) -> usize {
        self.pixel_values.len() / self.rows().max(1)
    }

    /// How many image placeholder tokens stand for this image in the prompt
    /// (see [`num_image_tokens`]).
    pub fn num_image_tokens(&self) -> Result<usize> {
        num_image_tokens(self.grid_thw, self.merge_size)
    }

    /// `pixel_values` as a `[rows, row_len]` f32 tensor.
    pub fn to_tensor(&self, device: &candle_core::Device) -> Result<candle_core::Tensor> {
        Ok(candle_core::Tensor::from_slice(
            &self.pixel_values,
            (self.rows(), self.row_len()),
            device,
        )?)
    }
}

/// Image placeholder tokens for a patch grid: `grid_t * grid_h * grid_w / merge_size²`.
///
/// Errors when `merge_size` is zero or does not divide the spatial grid.
pub fn num_image_tokens(grid_thw: [usize; 3], merge_size: usize) -> Result<usize> {
    ensure!(merge_size > 0, "merge_size must be positive");
    let [t, h, w] = grid_thw;
    ensure!(
        h.is_multiple_of(merge_size) && w.is_multiple_of(merge_size),
        "grid {h}x{w} is not divisible by merge_size {merge_size}"
    );
    t.checked_mul(h / merge_size)
        .and_then(|x| x.checked_mul(w / merge_size))
        .context("image token count overflows")
}

/// Preprocesses one still image for the vision tower (see the module doc).
pub fn preprocess(image: &image::DynamicImage, cfg: &VlImageConfig) -> Result<VlPixels> {
    cfg.validate()?;
    let rgb = image.to_rgb8();
    let (w0, h0) = (rgb.width() as usize, rgb.height() as usize);
    let (h, w) = smart_resize(h0, w0, cfg.factor(), cfg.min_pixels, cfg.max_pixels)?;
    let resized = super::bicubic::resize_bicubic_rgb(rgb.as_raw(), w0, h0, w, h)?;

    // Rescale in f64 then store f32 (transformers' `rescale`), normalize in f32; planar.
    let plane = h * w;
    let mut norm = vec![0f32; 3 * plane];
    for (i, px) in resized.chunks_exact(3).enumerate() {
        for c in 0..3 {
            let x = (f64::from(px[c]) * cfg.rescale_factor) as f32;
            norm[c * plane + i] = (x - cfg.image_mean[c]) / cfg.image_std[c];
        }
    }

    let (ps, ms, tps) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let (gh, gw) = (h / ps, w / ps);
    let grid_thw = [1, gh, gw];
    let mut out = Vec::new();
    out.try_reserve_exact(gh * gw * cfg.patch_dim())
        .context("allocating pixel values")?;
    for bh in 0..gh / ms {
        for bw in 0..gw / ms {
            for mh in 0..ms {
                for mw in 0..ms {
                    let y0 = (bh * ms + mh) * ps;
                    let x0 = (bw * ms + mw) * ps;
                    for c in 0..3 {
                        // Every temporal frame is the same still image.
                        for _ in 0..tps {
                            for y in y0..y0 + ps {
                                let row = c * plane + y * w;
                                out.extend_from_slice(&norm[row + x0..row + x0 + ps]);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(VlPixels {
        pixel_values: out,
        grid_thw,
        resized_hw: (h, w),
        merge_size: ms,
    })
}

#[cfg(test)]
mod tests;
