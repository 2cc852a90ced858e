use super::*;

/// Python's smart_resize on the same inputs, worked by hand in the comments.
#[test]
fn smart_resize_rounds_to_the_nearest_multiple_halves_to_even() {
    // 48 / 32 = 1.5 -> 2; 80 / 32 = 2.5 -> 2 (round half to even, as Python).
    assert_eq!(smart_resize(48, 80, 32, 0, 1 << 30).unwrap(), (64, 64));
    // 47 / 32 = 1.47 -> 1; 112 / 32 = 3.5 -> 4.
    assert_eq!(smart_resize(47, 112, 32, 0, 1 << 30).unwrap(), (32, 128));
    // Already multiples: unchanged.
    assert_eq!(smart_resize(224, 448, 28, 0, 1 << 30).unwrap(), (224, 448));
}

#[test]
fn smart_resize_scales_down_with_floor_above_max_pixels() {
    // 1000 x 2000 at max 262144: beta = sqrt(2e6 / 262144) = 2.7621;
    // 1000 / beta / 32 = 11.31 -> 11 * 32 = 352; 2000 / beta / 32 = 22.63 -> 704.
    let (h, w) = smart_resize(1000, 2000, 32, 65_536, PAPER_MAX_PIXELS).unwrap();
    assert_eq!((h, w), (352, 704));
    assert!(h * w <= PAPER_MAX_PIXELS);
    // A thin strip keeps at least one factor on its short side: beta = 4.3075,
    // 40 / beta / 32 = 0.29 -> max(32, 0); 1900 / beta / 32 = 13.78 -> 416.
    assert_eq!(smart_resize(40, 1900, 32, 0, 4096).unwrap(), (32, 416));
}

#[test]
fn smart_resize_scales_up_with_ceil_below_min_pixels() {
    // 5 x 7 at min 1024: beta = sqrt(1024 / 35) = 5.409; 27.04 / 8 -> 4 * 8 = 32;
    // 37.86 / 8 -> 5 * 8 = 40.
    assert_eq!(smart_resize(5, 7, 8, 1024, 4096).unwrap(), (32, 40));
    let (h, w) = smart_resize(1, 1, 32, 65_536, 16_777_216).unwrap();
    assert_eq!((h, w), (256, 256));
}

#[test]
fn smart_resize_refuses_zero_sizes_and_extreme_aspect_ratios() {
    let e = smart_resize(0, 10, 32, 0, 1000).unwrap_err().to_string();
    assert!(e.contains("zero side"), "{e}");
    let e = smart_resize(10, 0, 32, 0, 1000).unwrap_err().to_string();
    assert!(e.contains("zero side"), "{e}");
    let e = smart_resize(10, 10, 0, 0, 1000).unwrap_err().to_string();
    assert!(e.contains("factor"), "{e}");
    let e = smart_resize(1, 201, 32, 0, 1 << 20)
        .unwrap_err()
        .to_string();
    assert!(e.contains("aspect ratio 201.0"), "{e}");
    let e = smart_resize(402, 2, 32, 0, 1 << 20)
        .unwrap_err()
        .to_string();
    assert!(e.contains("aspect ratio"), "{e}");
    // Exactly 200 is allowed, as in transformers (`> 200` is refused).
    assert!(smart_resize(1, 200, 32, 1024, 1 << 20).is_ok());
    // 10 / 32 rounds to 0 and min_pixels 0 does not lift it.
    let e = smart_resize(10, 10, 32, 0, 1000).unwrap_err().to_string();
    assert!(e.contains("zero side at factor 32"), "{e}");
}

#[test]
fn config_reads_both_forms_of_the_pixel_limits() {
    let size = VlImageConfig::from_json_str(
        r#"{"size": {"shortest_edge": 100, "longest_edge": 5000}, "patch_size": 14,
            "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "X"}"#,
    )
    .unwrap();
    assert_eq!((size.min_pixels, size.max_pixels), (100, 5000));
    assert_eq!(size.patch_size, 14);
    assert_eq!(size.merge_size, 2);
    let flat = VlImageConfig::from_json_str(r#"{"min_pixels": 64, "max_pixels": 2048}"#).unwrap();
    assert_eq!((flat.min_pixels, flat.max_pixels), (64, 2048));
    // min/max_pixels override `size`, as in transformers.
    let both = VlImageConfig::from_json_str(
        r#"{"size": {"shortest_edge": 1, "longest_edge": 9}, "max_pixels": 7000}"#,
    )
    .unwrap();
    assert_eq!((both.min_pixels, both.max_pixels), (1, 7000));
    let scalar =
        VlImageConfig::from_json_str(r#"{"image_mean": 0.25, "image_std": [1, 2, 4]}"#).unwrap();
    assert_eq!(scalar.image_mean, [0.25; 3]);
    assert_eq!(scalar.image_std, [1.0, 2.0, 4.0]);
    assert_eq!(
        VlImageConfig::from_json_str("{}").unwrap(),
        VlImageConfig::qwen3_vl()
    );
}

#[test]
fn config_errors_name_the_bad_key() {
    for (json, needle) in [
        (
            r#"{"size": {"height": 224, "width": 224}}"#,
            "shortest_edge",
        ),
        (r#"{"patch_size": 0}"#, "patch_size"),
        (r#"{"patch_size": -3}"#, "patch_size"),
        (r#"{"image_std": [0.5, 0, 0.5]}"#, "image_std[1]"),
        (r#"{"image_mean": [0.5, 0.5]}"#, "image_mean"),
        (r#"{"min_pixels": 10, "max_pixels": 5}"#, "min_pixels"),
        (r#"{"do_normalize": false}"#, "do_normalize"),
        (r#"{"resample": 2}"#, "resample"),
        (r#"{"rescale_factor": "x"}"#, "rescale_factor"),
        ("[1, 2]", "JSON object"),
        ("{", "not valid JSON"),
    ] {
        let e = format!("{:#}", VlImageConfig::from_json_str(json).unwrap_err());
        assert!(e.contains(needle), "{json}: {e}");
    }
}

#[test]
fn paper_config_caps_pixels() {
    let cfg = VlImageConfig::qwen3_vl_paper();
    assert_eq!(cfg.max_pixels, 262_144);
    assert_eq!(cfg.factor(), 32);
    assert_eq!(cfg.patch_dim(), 1536);
    let img = image::DynamicImage::new_rgb8(1280, 720);
    let px = preprocess(&img, &cfg).unwrap();
    let (h, w) = px.resized_hw;
    assert!(h * w <= 262_144 && h % 32 == 0 && w % 32 == 0, "{h}x{w}");
    assert_eq!(px.grid_thw, [1, h / 16, w / 16]);
    assert_eq!(px.num_image_tokens().unwrap(), h * w / (32 * 32));
    assert_eq!(px.pixel_values.len(), px.rows() * 1536);
}

#[test]
fn image_token_count_divides_by_merge_area() {
    assert_eq!(num_image_tokens([1, 16, 24], 2).unwrap(), 96);
    assert_eq!(num_image_tokens([2, 4, 4], 2).unwrap(), 8);
    assert!(num_image_tokens([1, 3, 4], 2).is_err());
    assert!(num_image_tokens([1, 4, 4], 0).is_err());
}

/// The patch order, checked on an image whose pixel values encode their position.
#[test]
fn patches_follow_transformers_order() {
    let cfg = VlImageConfig {
        patch_size: 2,
        temporal_patch_size: 2,
        merge_size: 2,
        min_pixels: 0,
        max_pixels: 1 << 20,
        image_mean: [0.0; 3],
        image_std: [1.0; 3],
        rescale_factor: 1.0,
    };
    // 8 x 12: already a multiple of the factor 4, so not resampled.
    let img = image::RgbImage::from_fn(12, 8, |x, y| {
        image::Rgb([(y * 12 + x) as u8, 100 + y as u8, 200 + x as u8])
    });
    let px = preprocess(&image::DynamicImage::ImageRgb8(img), &cfg).unwrap();
    assert_eq!(px.grid_thw, [1, 4, 6]);
    assert_eq!(px.row_len(), 24);
    let at = |row: usize, col: usize| px.pixel_values[row * 24 + col];
    // Row order (block_h, block_w, merge_h, merge_w); row 5 = block (0, 1), merge (0, 1):
    // patch (0, 3), so pixels y 0..2, x 6..8.
    assert_eq!(at(5, 0), 6.0);
    // Column order (channel, temporal, y, x): col 3 = channel 0, frame 0, y 1, x 1.
    assert_eq!(at(5, 3), (12 + 7) as f32);
    // Frame 1 repeats frame 0.
    assert_eq!(at(5, 4 + 3), at(5, 3));
    // Channel 1 (col 8..16) and 2 (col 16..24).
    assert_eq!(at(5, 8 + 2), 101.0);
    assert_eq!(at(5, 16 + 1), 207.0);
    // Row 12 = block (1, 0), merge (0, 0): patch (2, 0), pixel y 4, x 0.
    assert_eq!(at(12, 0), 48.0);
}
