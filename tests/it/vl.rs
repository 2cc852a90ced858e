//! Qwen3-VL image preprocessing against transformers' slow Qwen2-VL image processor
//! (`tests/data/vl/`, written by `scripts/vl/make_preprocess_fixture.py`).

use rmsweb::model::vl::{VlImageConfig, num_image_tokens, preprocess};
use serde_json::Value;
use std::path::{Path, PathBuf};

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
