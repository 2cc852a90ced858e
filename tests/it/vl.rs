//! Qwen3-VL image preprocessing against transformers' slow Qwen2-VL image processor
//! (`tests/data/vl/`, written by `scripts/vl/make_preprocess_fixture.py`).

use rmsweb::model::vl::{VlImageConfig, num_image_tokens, preprocess};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The text decoder and the joined model (`model::vl::{mrope, text, model}`).
mod decoder;
mod hf;
mod rl;
mod serve;
mod sft;

/// Largest |rust - transformers| accepted per value: none. The resize follows PIL's
/// integer arithmetic (so the resized u8 pixels are the same) and rescale/normalize
/// follow numpy's f64-then-f32 steps, so every value is the same f32. One u8 step of
/// drift in the resampler would show as (1/255)/std = 0.0078 at std 0.5 (the `image`
/// crate's CatmullRom resize is off by up to three such steps on this fixture).
const TOL: f32 = 0.0;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vl")
}

fn fixture() -> Value {
    let text = std::fs::read_to_string(data_dir().join("preprocess_fixture.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn preprocess_matches_transformers_fixture() {
    let fx = fixture();
    assert!(
        fx["transformers_version"]
            .as_str()
            .unwrap()
            .starts_with('4')
    );
    let cases = fx["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let mut max_diff = 0f32;
    let mut compared = 0usize;
    let (mut upscaled, mut downscaled, mut vertical_first, mut grey, mut alpha) =
        (false, false, false, false, false);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let img = image::open(data_dir().join(case["image"].as_str().unwrap())).unwrap();
        let mode_ok = match case["mode"].as_str().unwrap() {
            "RGB" => matches!(img, image::DynamicImage::ImageRgb8(_)),
            "RGBA" => matches!(img, image::DynamicImage::ImageRgba8(_)),
            "L" => matches!(img, image::DynamicImage::ImageLuma8(_)),
            m => panic!("{name}: unexpected mode {m}"),
        };
        assert!(mode_ok, "{name}: decoded as {:?}", img.color());
        let hw = usizes(&case["original_hw"]);
        assert_eq!(
            [img.height() as usize, img.width() as usize],
            [hw[0], hw[1]]
        );

        let cfg = VlImageConfig::from_json_str(&case["preprocessor_config"].to_string()).unwrap();
        let px = preprocess(&img, &cfg).unwrap();
        let resized = usizes(&case["resized_hw"]);
        assert_eq!(
            px.resized_hw,
            (resized[0], resized[1]),
            "{name}: resized size"
        );
        assert_eq!(
            px.grid_thw.to_vec(),
            usizes(&case["grid_thw"]),
            "{name}: grid"
        );
        let shape = usizes(&case["shape"]);
        assert_eq!(
            [px.rows(), px.row_len()],
            [shape[0], shape[1]],
            "{name}: shape"
        );
        let tokens = px.num_image_tokens().unwrap();
        assert_eq!(
            tokens,
            num_image_tokens(px.grid_thw, cfg.merge_size).unwrap()
        );
        assert_eq!(tokens * cfg.merge_size.pow(2), px.rows(), "{name}: tokens");
        // Which branches of the pipeline this case exercises (checked below).
        let (h0, w0) = (hw[0] as i64, hw[1] as i64);
        let (h, w) = (resized[0] as i64, resized[1] as i64);
        upscaled |= h * w > h0 * w0;
        downscaled |= h < h0 && w < w0;
        vertical_first |= h0 - h > 0 && h0 - h > 2 * (w0 - w);
        grey |= matches!(img, image::DynamicImage::ImageLuma8(_));
        alpha |= img.color().has_alpha();

        let cols = px.row_len();
        let row = |r: usize| &px.pixel_values[r * cols..(r + 1) * cols];
        let mut expect_rows: Vec<(usize, Vec<f32>)> = Vec::new();
        if let Some(all) = case.get("pixel_values") {
            let all = floats(all);
            assert_eq!(all.len(), px.pixel_values.len(), "{name}");
            expect_rows.extend((0..px.rows()).map(|r| (r, all[r * cols..(r + 1) * cols].to_vec())));
        } else {
            for (r, vals) in case["sampled_rows"].as_object().unwrap() {
                expect_rows.push((r.parse().unwrap(), floats(vals)));
            }
        }
        assert!(!expect_rows.is_empty(), "{name}: no values to compare");
        for (r, want) in &expect_rows {
            for (c, (a, b)) in row(*r).iter().zip(want).enumerate() {
                let d = (a - b).abs();
                assert!(
                    d <= TOL,
                    "{name}: row {r} col {c}: rust {a} vs transformers {b}"
                );
                max_diff = max_diff.max(d);
                compared += 1;
            }
        }
        // Every row, through its plain and column-weighted sums (order within a row).
        let sums = floats(&case["row_sums"]);
        let weighted = floats(&case["row_weighted_sums"]);
        assert_eq!(sums.len(), px.rows(), "{name}");
        for r in 0..px.rows() {
            let s: f64 = row(r).iter().map(|&v| f64::from(v)).sum();
            let ws: f64 = row(r)
                .iter()
                .enumerate()
                .map(|(c, &v)| (c + 1) as f64 * f64::from(v))
                .sum();
            let (s0, ws0) = (f64::from(sums[r]), f64::from(weighted[r]));
            assert!(
                (s - s0).abs() <= 1e-4 * s0.abs().max(1.0),
                "{name}: row {r} sum {s} vs {s0}"
            );
            assert!(
                (ws - ws0).abs() <= 1e-4 * ws0.abs().max(1.0),
                "{name}: row {r} weighted sum {ws} vs {ws0}"
            );
        }
    }
    assert!(
        upscaled && downscaled && vertical_first && grey && alpha,
        "the fixture no longer covers every branch"
    );
    eprintln!("vl fixture: {compared} values, max |rust - transformers| = {max_diff}");
}

#[test]
fn preprocess_refuses_unusable_images() {
    let cfg = VlImageConfig::qwen3_vl_paper();
    let empty = image::DynamicImage::new_rgb8(0, 7);
    let e = preprocess(&empty, &cfg).unwrap_err().to_string();
    assert!(e.contains("zero side"), "{e}");
    let strip = image::DynamicImage::new_rgb8(1000, 4);
    let e = preprocess(&strip, &cfg).unwrap_err().to_string();
    assert!(e.contains("aspect ratio 250.0"), "{e}");
    let bad = VlImageConfig {
        merge_size: 0,
        ..VlImageConfig::qwen3_vl()
    };
    let e = preprocess(&image::DynamicImage::new_rgb8(64, 64), &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("merge_size"), "{e}");
}

// ---------------------------------------------------------------------------------
// Vision tower (`model::vl::vision`) against an independent reference and against
// candle-transformers.
//
// candle-transformers 0.11.1's `Qwen3VLVisionModel` cannot be built from outside the
// crate (`qwen3_vl::vision` is a private module; only `Qwen3VLModel`, whose forward
// returns text logits, is public): `vision_tower_matches_candle_transformers` reaches
// it through `Qwen3VLModel` with a pass-through text model, which shows each token only
// up to its scale. The full check is against the reference below, written here from
// transformers' formulas: plain f64 loops over the weights by HF name, with the
// Conv3d indexed as a 5-D kernel, per-frame attention, and erf GELU in the mergers.

mod vision_ref {
    use candle_core::Tensor;
    use std::cell::RefCell;
    use std::collections::{HashMap, HashSet};

    /// Weights by HF name (under `model.visual.`), as f64 vectors.
    pub struct Weights {
        pub map: HashMap<String, Vec<f64>>,
        pub used: RefCell<HashSet<String>>,
    }

    impl Weights {
        pub fn new(ts: &HashMap<String, Tensor>) -> Self {
            let map = ts
                .iter()
                .map(|(k, t)| {
                    let v = t
                        .flatten_all()
                        .unwrap()
                        .to_dtype(candle_core::DType::F64)
                        .unwrap()
                        .to_vec1::<f64>()
                        .unwrap();
                    (k.clone(), v)
                })
                .collect();
            Weights {
                map,
                used: RefCell::new(HashSet::new()),
            }
        }

        pub fn get(&self, name: &str) -> &[f64] {
            let full = format!("model.visual.{name}");
            self.used.borrow_mut().insert(full.clone());
            self.map
                .get(&full)
                .unwrap_or_else(|| panic!("no weight {full}"))
        }
    }

    /// Tiny tower sizes the reference reads.
    pub struct Dims {
        pub depth: usize,
        pub hidden: usize,
        pub inter: usize,
        pub heads: usize,
        pub patch: usize,
        pub temporal: usize,
        pub merge: usize,
        pub channels: usize,
        pub out: usize,
        pub side: usize,
        pub deepstack: Vec<usize>,
    }

    fn linear(w: &Weights, name: &str, x: &[f64], inp: usize, out: usize) -> Vec<f64> {
        let (wt, b) = (
            w.get(&format!("{name}.weight")),
            w.get(&format!("{name}.bias")),
        );
        assert_eq!(wt.len(), out * inp, "{name}");
        let n = x.len() / inp;
        let mut y = vec![0.0; n * out];
        for r in 0..n {
            for o in 0..out {
                let mut s = b[o];
                for i in 0..inp {
                    s += wt[o * inp + i] * x[r * inp + i];
                }
                y[r * out + o] = s;
            }
        }
        y
    }

    fn layer_norm(w: &Weights, name: &str, x: &[f64], d: usize) -> Vec<f64> {
        let (g, b) = (
            w.get(&format!("{name}.weight")),
            w.get(&format!("{name}.bias")),
        );
        assert_eq!(g.len(), d, "{name}");
        let mut y = vec![0.0; x.len()];
        for (row, out) in x.chunks(d).zip(y.chunks_mut(d)) {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
            for i in 0..d {
                out[i] = (row[i] - mean) / (var + 1e-6).sqrt() * g[i] + b[i];
            }
        }
        y
    }

    fn gelu_tanh(x: f64) -> f64 {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
    }

    fn gelu_erf(x: f64) -> f64 {
        0.5 * x * (1.0 + candle_core::cpu::erf::erf_f64(x / std::f64::consts::SQRT_2))
    }

    fn merger(w: &Weights, name: &str, x: &[f64], d: &Dims, post: bool) -> Vec<f64> {
        let unit = d.merge * d.merge;
        let merged = d.hidden * unit;
        // Tokens are already in merge-block order: each `unit` consecutive rows concatenate.
        let normed = if post {
            layer_norm(w, &format!("{name}.norm"), x, merged)
        } else {
            layer_norm(w, &format!("{name}.norm"), x, d.hidden)
        };
        let mut h = linear(w, &format!("{name}.linear_fc1"), &normed, merged, merged);
        h.iter_mut().for_each(|v| *v = gelu_erf(*v));
        linear(w, &format!("{name}.linear_fc2"), &h, merged, d.out)
    }

    /// `(image tokens, deepstack features)` of `pixels` (rows of C·T·P·P) for `grids`.
    pub fn forward(
        w: &Weights,
        d: &Dims,
        pixels: &[f64],
        grids: &[[usize; 3]],
    ) -> (Vec<f64>, Vec<Vec<f64>>) {
        let (hid, p, t_p, c_n) = (d.hidden, d.patch, d.temporal, d.channels);
        let pd = c_n * t_p * p * p;
        let n = pixels.len() / pd;
        // Patch embedding: Conv3d with kernel = stride, weight (hidden, C, T, P, P).
        let cw = w.get("patch_embed.proj.weight");
        let cb = w.get("patch_embed.proj.bias");
        assert_eq!(cw.len(), hid * pd);
        let mut x = vec![0.0; n * hid];
        for r in 0..n {
            for o in 0..hid {
                let mut s = cb[o];
                for c in 0..c_n {
                    for t in 0..t_p {
                        for i in 0..p {
                            for j in 0..p {
                                let k = ((c * t_p + t) * p + i) * p + j;
                                s += cw[o * pd + k] * pixels[r * pd + k];
                            }
                        }
                    }
                }
                x[r * hid + o] = s;
            }
        }
        // Token positions and frames, merge-block order.
        let mut rc = Vec::new();
        let mut frame = Vec::new();
        let mut dims_of = Vec::new();
        let mut f_id = 0;
        for &[t, h, wd] in grids {
            for _ in 0..t {
                for br in 0..h / d.merge {
                    for bc in 0..wd / d.merge {
                        for ir in 0..d.merge {
                            for ic in 0..d.merge {
                                rc.push((br * d.merge + ir, bc * d.merge + ic));
                                frame.push(f_id);
                                dims_of.push((h, wd));
                            }
                        }
                    }
                }
                f_id += 1;
            }
        }
        assert_eq!(rc.len(), n);
        // Bilinear position embeddings.
        let pe = w.get("pos_embed.weight");
        let g = d.side;
        let sample = |i: usize, steps: usize| -> f64 {
            if steps == 1 {
                0.0
            } else {
                i as f64 * (g - 1) as f64 / (steps - 1) as f64
            }
        };
        for tok in 0..n {
            let ((r, c), (h, wd)) = (rc[tok], dims_of[tok]);
            let (hv, wv) = (sample(r, h), sample(c, wd));
            let (r0, c0) = (hv.floor() as usize, wv.floor() as usize);
            let (r1, c1) = ((r0 + 1).min(g - 1), (c0 + 1).min(g - 1));
            let (dh, dw) = (hv - r0 as f64, wv - c0 as f64);
            for k in 0..hid {
                let e = |rr: usize, cc: usize| pe[(rr * g + cc) * hid + k];
                x[tok * hid + k] += (1.0 - dh) * (1.0 - dw) * e(r0, c0)
                    + (1.0 - dh) * dw * e(r0, c1)
                    + dh * (1.0 - dw) * e(r1, c0)
                    + dh * dw * e(r1, c1);
            }
        }
        // Blocks.
        let hd = hid / d.heads;
        let half = hd / 2;
        let quarter = hd / 4;
        let angle = |tok: usize, i: usize| -> f64 {
            let (r, c) = rc[tok];
            let (coord, j) = if i < quarter {
                (r, i)
            } else {
                (c, i - quarter)
            };
            coord as f64 / 10_000f64.powf(2.0 * j as f64 / half as f64)
        };
        let rotate = |v: &mut [f64], tok: usize| {
            for i in 0..half {
                let (a, b) = (v[i], v[i + half]);
                let (s, co) = angle(tok, i).sin_cos();
                v[i] = a * co - b * s;
                v[i + half] = b * co + a * s;
            }
        };
        let mut deep = Vec::new();
        for l in 0..d.depth {
            let b = format!("blocks.{l}");
            let y = layer_norm(w, &format!("{b}.norm1"), &x, hid);
            let qkv = linear(w, &format!("{b}.attn.qkv"), &y, hid, 3 * hid);
            let mut ctx = vec![0.0; n * hid];
            for h in 0..d.heads {
                let head = |tok: usize, which: usize| -> Vec<f64> {
                    let o = tok * 3 * hid + which * hid + h * hd;
                    qkv[o..o + hd].to_vec()
                };
                let mut qs: Vec<Vec<f64>> = (0..n).map(|i| head(i, 0)).collect();
                let mut ks: Vec<Vec<f64>> = (0..n).map(|i| head(i, 1)).collect();
                let vs: Vec<Vec<f64>> = (0..n).map(|i| head(i, 2)).collect();
                for tok in 0..n {
                    rotate(&mut qs[tok], tok);
                    rotate(&mut ks[tok], tok);
                }
                for qi in 0..n {
                    let keys: Vec<usize> = (0..n).filter(|&k| frame[k] == frame[qi]).collect();
                    let scores: Vec<f64> = keys
                        .iter()
                        .map(|&k| {
                            qs[qi].iter().zip(&ks[k]).map(|(a, b)| a * b).sum::<f64>()
                                / (hd as f64).sqrt()
                        })
                        .collect();
                    let mx = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let ex: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
                    let z: f64 = ex.iter().sum();
                    for (e, &k) in ex.iter().zip(&keys) {
                        for i in 0..hd {
                            ctx[qi * hid + h * hd + i] += e / z * vs[k][i];
                        }
                    }
                }
            }
            let a = linear(w, &format!("{b}.attn.proj"), &ctx, hid, hid);
            x.iter_mut().zip(&a).for_each(|(v, a)| *v += a);
            let y = layer_norm(w, &format!("{b}.norm2"), &x, hid);
            let mut m = linear(w, &format!("{b}.mlp.linear_fc1"), &y, hid, d.inter);
            m.iter_mut().for_each(|v| *v = gelu_tanh(*v));
            let m = linear(w, &format!("{b}.mlp.linear_fc2"), &m, d.inter, hid);
            x.iter_mut().zip(&m).for_each(|(v, m)| *v += m);
            if let Some(j) = d.deepstack.iter().position(|&i| i == l) {
                deep.push(merger(
                    w,
                    &format!("deepstack_merger_list.{j}"),
                    &x,
                    d,
                    true,
                ));
            }
        }
        (merger(w, "merger", &x, d, false), deep)
    }
}

fn tiny_vision() -> (rmsweb::model::vl::VisionConfig, vision_ref::Dims) {
    let cfg: rmsweb::model::vl::VisionConfig = serde_json::from_value(serde_json::json!({
        "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4,
        "patch_size": 4, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "in_channels": 3, "out_hidden_size": 24, "num_position_embeddings": 36,
        "deepstack_visual_indexes": [1, 0], "hidden_act": "gelu_pytorch_tanh",
        "model_type": "qwen3_vl", "initializer_range": 0.02
    }))
    .unwrap();
    let dims = vision_ref::Dims {
        depth: 2,
        hidden: 32,
        inter: 64,
        heads: 4,
        patch: 4,
        temporal: 2,
        merge: 2,
        channels: 3,
        out: 24,
        side: 6,
        deepstack: vec![1, 0],
    };
    (cfg, dims)
}

/// Weights of every tower tensor at test scale (matrices std 1/sqrt(fan-in), norms
/// around 1, biases and embeddings nonzero), so a wrong index or formula shows far
/// above the tolerance.
fn vision_test_weights(
    cfg: &rmsweb::model::vl::VisionConfig,
    seed: u64,
) -> std::collections::HashMap<String, candle_core::Tensor> {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let mut out = std::collections::HashMap::new();
    for (name, shape) in cfg.weight_shapes() {
        let n: usize = shape.iter().product();
        let fan_in = n / shape[0];
        let (mean, std) = if name.contains("pos_embed") {
            (0.0, 1.0)
        } else if shape.len() == 1 && name.contains("norm") && name.ends_with("weight") {
            (1.0, 0.2)
        } else if shape.len() == 1 {
            (0.0, 0.1)
        } else {
            (0.0, 1.0 / (fan_in as f32).sqrt())
        };
        let v: Vec<f32> = (0..n)
            .map(|_| mean + std * normal.sample(&mut rng))
            .collect();
        out.insert(
            format!("model.visual.{name}"),
            candle_core::Tensor::from_vec(v, shape, &candle_core::Device::Cpu).unwrap(),
        );
    }
    out
}

fn seeded_normal(shape: &[usize], seed: u64) -> candle_core::Tensor {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| normal.sample(&mut rng)).collect();
    candle_core::Tensor::from_vec(v, shape, &candle_core::Device::Cpu).unwrap()
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn to_f64(t: &candle_core::Tensor) -> Vec<f64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}

/// Two images (one of two frames), weights through a safetensors file: the tower in
/// f32 (fused CPU kernels) and f64 (composite ops) equals the f64 reference.
#[test]
fn vision_tower_matches_reference() {
    use candle_core::{DType, Device};
    use rmsweb::model::vl::{Gelu, VisionModel};
    let (cfg, dims) = tiny_vision();
    let weights = vision_test_weights(&cfg, 7);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vision.safetensors");
    candle_core::safetensors::save(&weights, &path).unwrap();
    let loaded = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    // [1, 4, 6]: 6x6 table interpolated down in rows; [2, 8, 4]: two frames, up in rows.
    let grids = [[1usize, 4, 6], [2, 8, 4]];
    let rows: usize = grids.iter().map(|g| g.iter().product::<usize>()).sum();
    let pd = cfg.patch_dim();
    let pixels = seeded_normal(&[rows, pd], 11);
    let reference = vision_ref::Weights::new(&loaded);
    let (want, want_deep) = vision_ref::forward(&reference, &dims, &to_f64(&pixels), &grids);
    assert_eq!(
        reference.used.borrow().len(),
        loaded.len(),
        "the reference reads every weight"
    );
    let scale = want.iter().map(|v| v.abs()).fold(0.0, f64::max);
    eprintln!("reference image embeds max |x| {scale:.3}");
    assert!(scale > 0.5, "outputs of unit scale (max |x| = {scale})");
    assert_eq!(want_deep.len(), 2);
    for (dtype, tol) in [(DType::F32, 1e-4), (DType::F64, 1e-6)] {
        let model = VisionModel::from_weights(&cfg, loaded.clone(), dtype, &Device::Cpu).unwrap();
        let (embeds, deep) = model.forward(&pixels, &grids).unwrap();
        assert_eq!(embeds.dims(), [rows / 4, 24]);
        assert_eq!(embeds.dtype(), dtype);
        let d = max_abs_diff(&to_f64(&embeds), &want);
        eprintln!("{dtype:?}: image embeds max |diff| {d:.3e}");
        assert!(d < tol, "{dtype:?} image embeds differ by {d}");
        assert_eq!(deep.len(), 2);
        for (j, (got, want)) in deep.iter().zip(&want_deep).enumerate() {
            assert_eq!(got.dims(), [rows / 4, 24]);
            let d = max_abs_diff(&to_f64(got), want);
            eprintln!("{dtype:?}: deepstack {j} max |diff| {d:.3e}");
            assert!(d < tol, "{dtype:?} deepstack feature {j} differs by {d}");
        }
    }
    // The tolerance separates the mergers' exact GELU from the tanh approximation.
    let tanh = VisionModel::from_weights(&cfg, loaded, DType::F64, &Device::Cpu)
        .unwrap()
        .with_merger_act(Gelu::Tanh);
    let (embeds, _) = tanh.forward(&pixels, &grids).unwrap();
    let d = max_abs_diff(&to_f64(&embeds), &want);
    eprintln!("tanh-GELU mergers: image embeds max |diff| {d:.3e}");
    assert!(d > 1e-4, "tanh mergers within {d} of the erf reference");
}

/// f64 gradients of the tower (composite ops) against central finite differences,
/// at random coordinates of the patch embedding, position table, one block's norm,
/// attention and MLP weights, the merger and a DeepStack merger, and the pixels; then
/// the f32 tower's gradients (fused CPU attention and linear kernels) against the f64
/// ones. The finite-difference tolerance is 1e-6 relative, not tighter: candle 0.11
/// writes the GELU derivatives with six-digit constants (`0.797885`, `0.398942`), so
/// its backward is off by a few 1e-7 (measured: worst 3e-7; the GELU-free last bias
/// agrees to 1e-11).
#[test]
fn vision_tower_gradients_match_finite_differences() {
    use candle_core::{DType, Device, Tensor, Var};
    use rand::{Rng, SeedableRng};
    use rmsweb::model::vl::{VisionConfig, VisionModel};
    let cfg: VisionConfig = serde_json::from_value(serde_json::json!({
        "depth": 1, "hidden_size": 16, "intermediate_size": 24, "num_heads": 2,
        "patch_size": 2, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "in_channels": 3, "out_hidden_size": 8, "num_position_embeddings": 9,
        "deepstack_visual_indexes": [0]
    }))
    .unwrap();
    let weights = vision_test_weights(&cfg, 3);
    let (model, vars) =
        VisionModel::from_weights_trainable(&cfg, &weights, DType::F64, &Device::Cpu).unwrap();
    assert_eq!(vars.len(), weights.len(), "every weight trains");
    let vars: std::collections::HashMap<String, Var> = vars.into_iter().collect();
    let grids = [[1usize, 2, 4], [1, 4, 2]];
    let rows = 16;
    let pixels = Var::from_tensor(
        &seeded_normal(&[rows, cfg.patch_dim()], 5)
            .to_dtype(DType::F64)
            .unwrap(),
    )
    .unwrap();
    let probe_e = seeded_normal(&[rows / 4, 8], 6)
        .to_dtype(DType::F64)
        .unwrap();
    let probe_d = seeded_normal(&[rows / 4, 8], 8)
        .to_dtype(DType::F64)
        .unwrap();
    let loss = || -> Tensor {
        let (e, d) = model.forward(pixels.as_tensor(), &grids).unwrap();
        let a = (e * &probe_e).unwrap().sum_all().unwrap();
        let b = (&d[0] * &probe_d).unwrap().sum_all().unwrap();
        (a + b).unwrap()
    };
    let grads = loss().backward().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let names = [
        "model.visual.patch_embed.proj.weight",
        "model.visual.patch_embed.proj.bias",
        "model.visual.pos_embed.weight",
        "model.visual.blocks.0.norm1.weight",
        "model.visual.blocks.0.attn.qkv.weight",
        "model.visual.blocks.0.attn.proj.bias",
        "model.visual.blocks.0.norm2.bias",
        "model.visual.blocks.0.mlp.linear_fc1.weight",
        "model.visual.blocks.0.mlp.linear_fc2.weight",
        "model.visual.merger.norm.weight",
        "model.visual.merger.linear_fc1.weight",
        "model.visual.merger.linear_fc2.bias",
        "model.visual.deepstack_merger_list.0.norm.bias",
        "model.visual.deepstack_merger_list.0.linear_fc1.weight",
        "pixels",
    ];
    let (mut checked, mut nonzero, mut worst) = (0, 0, 0f64);
    for name in names {
        let var = if name == "pixels" {
            &pixels
        } else {
            &vars[name]
        };
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("no gradient for {name}"));
        let g = to_f64(g);
        let base = to_f64(var.as_tensor());
        let shape = var.as_tensor().dims().to_vec();
        for _ in 0..3 {
            let i = rng.random_range(0..base.len());
            let eps = 1e-5;
            let at = |x: f64| {
                let mut v = base.clone();
                v[i] = x;
                var.set(&Tensor::from_vec(v, shape.as_slice(), &Device::Cpu).unwrap())
                    .unwrap();
                loss().to_scalar::<f64>().unwrap()
            };
            let numeric = (at(base[i] + eps) - at(base[i] - eps)) / (2.0 * eps);
            at(base[i]);
            let err = (g[i] - numeric).abs() / numeric.abs().max(1.0);
            worst = worst.max(err);
            assert!(
                err < 1e-6,
                "{name}[{i}]: backward {} vs finite difference {numeric}",
                g[i]
            );
            checked += 1;
            nonzero += usize::from(numeric.abs() > 1e-6);
        }
    }
    eprintln!("{checked} coordinates, {nonzero} with nonzero gradient, worst rel err {worst:.2e}");
    assert!(
        nonzero >= checked * 3 / 4,
        "only {nonzero} of {checked} gradients nonzero"
    );

    // The same weights in f32: the fused kernels' backward passes.
    let (model32, vars32) =
        VisionModel::from_weights_trainable(&cfg, &weights, DType::F32, &Device::Cpu).unwrap();
    let vars32: std::collections::HashMap<String, Var> = vars32.into_iter().collect();
    let pixels32 = Var::from_tensor(&pixels.as_tensor().to_dtype(DType::F32).unwrap()).unwrap();
    let (e, d) = model32.forward(pixels32.as_tensor(), &grids).unwrap();
    let f32_of = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    let loss32 = ((e * f32_of(&probe_e)).unwrap().sum_all().unwrap()
        + (&d[0] * f32_of(&probe_d)).unwrap().sum_all().unwrap())
    .unwrap();
    let grads32 = loss32.backward().unwrap();
    let mut worst32 = 0f64;
    for name in names {
        let (v64, v32) = if name == "pixels" {
            (&pixels, &pixels32)
        } else {
            (&vars[name], &vars32[name])
        };
        let g64 = to_f64(grads.get(v64.as_tensor()).unwrap());
        let g32 = grads32
            .get(v32.as_tensor())
            .unwrap_or_else(|| panic!("no f32 gradient for {name}"));
        let g32 = to_f64(g32);
        let scale = g64.iter().map(|x| x.abs()).fold(1.0, f64::max);
        let err = max_abs_diff(&g32, &g64) / scale;
        worst32 = worst32.max(err);
        assert!(err < 1e-4, "{name}: f32 gradient off by {err} (relative)");
    }
    eprintln!("f32 (fused) vs f64 gradients: worst relative difference {worst32:.2e}");
}

/// A preprocessed image runs through a randomly initialized tower: one output token
/// per merge block, as `num_image_tokens` counts.
#[test]
fn vision_tower_reads_preprocessed_pixels() {
    use candle_core::{DType, Device};
    use rmsweb::model::vl::{VisionConfig, VisionModel};
    let cfg = VisionConfig {
        depth: 2,
        hidden_size: 32,
        intermediate_size: 64,
        num_heads: 4,
        out_hidden_size: 48,
        num_position_embeddings: 64,
        deepstack_visual_indexes: vec![0],
        ..VisionConfig::default()
    };
    let img = image::open(data_dir().join("wide_down.png")).unwrap();
    let pcfg = VlImageConfig {
        max_pixels: 128 * 128,
        min_pixels: 32 * 32,
        ..VlImageConfig::qwen3_vl()
    };
    let px = preprocess(&img, &pcfg).unwrap();
    let weights = VisionModel::random_weights(&cfg, 1).unwrap();
    let model = VisionModel::from_weights(&cfg, weights, DType::F32, &Device::Cpu).unwrap();
    let (embeds, deep) = model
        .forward(&px.to_tensor(&Device::Cpu).unwrap(), &[px.grid_thw])
        .unwrap();
    let tokens = px.num_image_tokens().unwrap();
    assert!(tokens > 1);
    assert_eq!(embeds.dims(), [tokens, 48]);
    assert_eq!(deep.len(), 1);
    assert_eq!(deep[0].dims(), [tokens, 48]);
    let v = to_f64(&embeds);
    assert!(v.iter().all(|x| x.is_finite()) && v.iter().any(|x| *x != 0.0));
}

/// The tower's configuration in candle-transformers' `vision_config` spelling.
fn ct_vision_config(cfg: &rmsweb::model::vl::VisionConfig) -> serde_json::Value {
    serde_json::json!({
        "depth": cfg.depth, "hidden_size": cfg.hidden_size,
        "out_hidden_size": cfg.out_hidden_size, "hidden_act": cfg.hidden_act,
        "intermediate_size": cfg.intermediate_size, "num_heads": cfg.num_heads,
        "in_chans": cfg.in_channels, "patch_size": cfg.patch_size,
        "spatial_merge_size": cfg.spatial_merge_size,
        "temporal_patch_size": cfg.temporal_patch_size,
        "num_position_embeddings": cfg.num_position_embeddings,
        "deepstack_visual_indexes": cfg.deepstack_visual_indexes
    })
}

/// candle-transformers' `Qwen3VLModel` over `vision` weights with a pass-through text
/// model of `layers` decoder layers (`o_proj`, `down_proj` zero), final norm weights
/// one (epsilon `eps`) and an identity `lm_head`, `out_hidden_size` wide.
fn candle_transformers_vl(
    cfg: &rmsweb::model::vl::VisionConfig,
    vision: &std::collections::HashMap<String, candle_core::Tensor>,
    layers: usize,
    eps: f64,
) -> candle_transformers::models::qwen3_vl::Qwen3VLModel {
    use candle_core::{DType, Device, Tensor};
    use candle_transformers::models::qwen3_vl::{Config, Qwen3VLModel};
    let dev = Device::Cpu;
    let hidden = cfg.out_hidden_size;
    let (heads, head_dim, inter) = (2, 12, 16);
    let mut all = vision.clone();
    let mut put = |name: String, t: Tensor| {
        all.insert(name, t);
    };
    let zeros = |shape: &[usize]| Tensor::zeros(shape, DType::F32, &dev).unwrap();
    let ones = |d: usize| Tensor::ones(d, DType::F32, &dev).unwrap();
    let lm = "model.language_model";
    put(
        format!("{lm}.embed_tokens.weight"),
        seeded_normal(&[hidden, hidden], 21),
    );
    for i in 0..layers {
        let p = format!("{lm}.layers.{i}");
        for (n, shape) in [
            ("self_attn.q_proj", [heads * head_dim, hidden]),
            ("self_attn.k_proj", [heads * head_dim, hidden]),
            ("self_attn.v_proj", [heads * head_dim, hidden]),
            ("mlp.gate_proj", [inter, hidden]),
            ("mlp.up_proj", [inter, hidden]),
        ] {
            put(
                format!("{p}.{n}.weight"),
                seeded_normal(&shape, 30 + i as u64),
            );
        }
        put(
            format!("{p}.self_attn.o_proj.weight"),
            zeros(&[hidden, heads * head_dim]),
        );
        put(format!("{p}.mlp.down_proj.weight"), zeros(&[hidden, inter]));
        for (n, d) in [
            ("self_attn.q_norm", head_dim),
            ("self_attn.k_norm", head_dim),
            ("input_layernorm", hidden),
            ("post_attention_layernorm", hidden),
        ] {
            put(format!("{p}.{n}.weight"), ones(d));
        }
    }
    put(format!("{lm}.norm.weight"), ones(hidden));
    put(
        "lm_head.weight".into(),
        Tensor::eye(hidden, DType::F32, &dev).unwrap(),
    );
    put("lm_head.bias".into(), zeros(&[hidden]));
    let ct_cfg: Config = serde_json::from_value(serde_json::json!({
        "text_config": {
            "head_dim": head_dim, "vocab_size": hidden, "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": heads,
            "hidden_act": "silu", "max_position_embeddings": 16, "rms_norm_eps": eps,
            "tie_word_embeddings": false, "rope_theta": 10000.0, "sliding_window": null
        },
        "vision_config": ct_vision_config(cfg),
        "image_token_id": 1, "video_token_id": 2,
        "vision_start_token_id": 3, "vision_end_token_id": 4
    }))
    .unwrap();
    Qwen3VLModel::new(
        &ct_cfg,
        candle_nn::VarBuilder::from_tensors(all, DType::F32, &dev),
    )
    .unwrap()
}

/// Against candle-transformers 0.11.1's Qwen3-VL. Its vision tower cannot be built
/// from outside (`qwen3_vl::vision` is private), so it runs inside the public
/// `Qwen3VLModel` with a pass-through text model ([`candle_transformers_vl`]), one
/// image token per batch row (the model returns the last position's logits). With
/// `k` decoder layers the logits are `rms_norm(embeds + deepstack_0 + … +
/// deepstack_{k-1})` per token (DeepStack feature `i` is added after layer `i`), so
/// k = 0, 1, 2 check the image tokens and each feature (up to each token's scale,
/// which `vision_tower_matches_reference` checks). This tower runs with its mergers'
/// GELU set to tanh, as candle-transformers has it. Same weights and pixels as
/// `vision_tower_matches_reference`.
#[test]
fn vision_tower_matches_candle_transformers() {
    use candle_core::{DType, Device, Tensor};
    use rmsweb::model::vl::{Gelu, VisionModel};
    let (cfg, _) = tiny_vision();
    let dev = Device::Cpu;
    let weights = vision_test_weights(&cfg, 7);
    let hidden = cfg.out_hidden_size;
    let eps = 1e-6;
    let grids = [[1usize, 4, 6], [2, 8, 4]];
    let rows: usize = grids.iter().map(|g| g.iter().product::<usize>()).sum();
    let n = rows / cfg.merge_unit();
    let pixels = seeded_normal(&[rows, cfg.patch_dim()], 11);
    let ours = |act: Gelu| {
        let model = VisionModel::from_weights(&cfg, weights.clone(), DType::F32, &dev)
            .unwrap()
            .with_merger_act(act);
        model.forward(&pixels, &grids).unwrap()
    };
    let rms_normed = |t: &Tensor| -> Vec<f64> {
        to_f64(t)
            .chunks(hidden)
            .flat_map(|r| {
                let rms = (r.iter().map(|v| v * v).sum::<f64>() / hidden as f64 + eps).sqrt();
                r.iter().map(move |v| v / rms).collect::<Vec<_>>()
            })
            .collect()
    };
    let (tanh_e, tanh_d) = ours(Gelu::Tanh);
    let (erf_e, erf_d) = ours(Gelu::Erf);
    assert_eq!(tanh_d.len(), 2);
    for layers in 0..=2 {
        let ct = candle_transformers_vl(&cfg, &weights, layers, eps);
        let got = ct
            .forward(
                &Tensor::ones((n, 1), DType::U32, &dev).unwrap(),
                Some(pixels.clone()),
                None,
                Some(Tensor::new(&[[1u32, 4, 6], [2, 8, 4]], &dev).unwrap()),
                None,
                vec![1; n],
                vec![vec![(0, 1)]; n],
                vec![],
                &vec![0; n],
            )
            .unwrap();
        assert_eq!(got.dims(), [n, hidden]);
        let got = to_f64(&got);
        let sum = |e: &Tensor, d: &[Tensor]| {
            d[..layers]
                .iter()
                .fold(e.clone(), |acc, f| (acc + f).unwrap())
        };
        let d = max_abs_diff(&rms_normed(&sum(&tanh_e, &tanh_d)), &got);
        let d_erf = max_abs_diff(&rms_normed(&sum(&erf_e, &erf_d)), &got);
        eprintln!(
            "candle-transformers, {layers} deepstack feature(s) added: max |diff| {d:.3e} \
             (erf-GELU mergers: {d_erf:.3e})"
        );
        assert!(
            d < 1e-4,
            "{layers}: differs from candle-transformers by {d}"
        );
        assert!(
            d_erf > 1e-4,
            "{layers}: the merger GELU is not seen ({d_erf})"
        );
    }
}
