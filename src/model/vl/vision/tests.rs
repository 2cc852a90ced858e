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
