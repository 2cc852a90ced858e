//! The fused CPU kernels (f32) against candle's composite ops (which the same
//! functions take for f64): values and gradients, and the whole model's gradients.

use super::model::{max_diff, tiny_config};
use candle_core::{DType, Device, Tensor, Var};
use rmsweb::model::Decoder;
use rmsweb::model::fused::{self, AttentionMask, RopeTables};
use std::collections::HashMap;
use std::sync::Arc;

fn rand(shape: &[usize], seed: u64) -> Tensor {
    // Deterministic values in (-2, 2) without a global RNG.
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let x = ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ seed.wrapping_mul(0xD1B5_4A32_D192_ED03))
                >> 11;
            (x as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// Output and input gradients of `f` (the gradient of `Σ out · r`, r random) in
/// `dtype`, inputs given in f64.
fn run(
    inputs: &[Tensor],
    dtype: DType,
    f: &dyn Fn(&[Tensor]) -> Tensor,
) -> (Tensor, Vec<Option<Tensor>>) {
    let vars: Vec<Var> = inputs
        .iter()
        .map(|t| Var::from_tensor(&t.to_dtype(dtype).unwrap()).unwrap())
        .collect();
    let ts: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
    let out = f(&ts);
    let r = rand(out.dims(), 99).to_dtype(dtype).unwrap();
    let grads = (&out * r).unwrap().sum_all().unwrap().backward().unwrap();
    let g = vars
        .iter()
        .map(|v| grads.get(v.as_tensor()).cloned())
        .collect();
    (out, g)
}

/// Asserts the f32 (fused) and f64 (composite) results agree within `tol`.
fn assert_fused_matches(name: &str, inputs: &[Tensor], tol: f64, f: &dyn Fn(&[Tensor]) -> Tensor) {
    let (o32, g32) = run(inputs, DType::F32, f);
    let (o64, g64) = run(inputs, DType::F64, f);
    let d = max_diff(&o32, &o64);
    assert!(d < tol, "{name}: outputs differ by {d}");
    for (i, (a, b)) in g32.iter().zip(&g64).enumerate() {
        let (a, b) = (a.as_ref(), b.as_ref());
        assert_eq!(
            a.is_some(),
            b.is_some(),
            "{name}: gradient {i} present in one only"
        );
        if let (Some(a), Some(b)) = (a, b) {
            let d = max_diff(a, b);
            assert!(d < tol, "{name}: gradient of input {i} differs by {d}");
        }
    }
}

#[test]
fn fused_kernels_are_on_for_f32_on_the_cpu_only() {
    assert!(fused::applies(&Device::Cpu, DType::F32));
    assert!(!fused::applies(&Device::Cpu, DType::F64));
    assert!(!fused::applies(&Device::Cpu, DType::BF16));
}

#[test]
fn rms_norm_matches_the_composite_op() {
    let x = rand(&[3, 5, 16], 1);
    let w = rand(&[16], 2).affine(0.25, 1.0).unwrap();
    assert_fused_matches("rms_norm", &[x, w], 1e-4, &|t| {
        fused::rms_norm(&t[0], &t[1], 1e-6).unwrap()
    });
}

#[test]
fn swiglu_and_linear_match_the_composite_ops() {
    assert_fused_matches(
        "swiglu",
        &[rand(&[4, 7, 12], 3), rand(&[4, 7, 12], 4)],
        1e-4,
        &|t| fused::swiglu(&t[0], &t[1]).unwrap(),
    );
    assert_fused_matches(
        "linear",
        &[rand(&[2, 9, 12], 5), rand(&[20, 12], 6)],
        1e-4,
        &|t| fused::linear(&t[0], &t[1]).unwrap(),
    );
    // A few rows (sampling steps) take the dot-product kernel.
    assert_fused_matches(
        "linear, few rows",
        &[rand(&[1, 3, 40], 15), rand(&[70, 40], 16)],
        1e-4,
        &|t| fused::linear(&t[0], &t[1]).unwrap(),
    );
}

#[test]
fn linear_computes_no_gradient_for_a_frozen_weight() {
    let x = Var::from_tensor(&rand(&[5, 8], 7).to_dtype(DType::F32).unwrap()).unwrap();
    let w = rand(&[3, 8], 8).to_dtype(DType::F32).unwrap();
    let y = fused::linear(x.as_tensor(), &w).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    assert!(grads.get(x.as_tensor()).is_some());
    assert!(grads.get(&w).is_none(), "a frozen weight got a gradient");
}

fn rope_tables(positions: usize, d: usize, dtype: DType) -> RopeTables {
    let inv: Vec<f64> = (0..d / 2)
        .map(|i| 1.0 / 10_000f64.powf(2.0 * i as f64 / d as f64))
        .collect();
    let f: Vec<f64> = (0..positions)
        .flat_map(|p| inv.iter().map(move |w| (p + 3) as f64 * w))
        .collect();
    let f = Tensor::from_vec(f, (positions, d / 2), &Device::Cpu).unwrap();
    RopeTables::new(
        f.cos().unwrap().to_dtype(dtype).unwrap(),
        f.sin().unwrap().to_dtype(dtype).unwrap(),
    )
    .unwrap()
}

#[test]
fn rope_matches_rope_slow() {
    let x = rand(&[2, 3, 6, 8], 9);
    assert_fused_matches("rope", &[x], 1e-4, &|t| {
        fused::rope(&t[0], &rope_tables(6, 8, t[0].dtype())).unwrap()
    });
}

fn key_bias(b: usize, keys: usize) -> Arc<Vec<f32>> {
    // The first key of batch row 1 is padding.
    Arc::new(
        (0..b * keys)
            .map(|i| if i == keys { -1e9 } else { 0.0 })
            .collect(),
    )
}

/// [`key_bias`] and the causal mask as one additive tensor `(b, 1, q, past + q)`.
fn additive_mask(b: usize, q: usize, past: usize, dtype: DType) -> Tensor {
    let keys = past + q;
    let kb = key_bias(b, keys);
    let mut v = Vec::with_capacity(b * q * keys);
    for bi in 0..b {
        for i in 0..q {
            for j in 0..keys {
                v.push(if j > past + i {
                    f32::NEG_INFINITY
                } else {
                    kb[bi * keys + j]
                });
            }
        }
    }
    Tensor::from_vec(v, (b, 1, q, keys), &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

#[test]
fn masked_softmax_matches_the_additive_mask_path() {
    let (b, h, q, past) = (2, 3, 5, 2);
    let keys = past + q;
    let mask = AttentionMask {
        causal_past: Some(past),
        key_bias: Some(key_bias(b, keys)),
        shared: None,
    };
    assert_fused_matches("softmax", &[rand(&[b, h, q, keys], 10)], 1e-5, &|t| {
        let dtype = t[0].dtype();
        let additive = additive_mask(b, q, past, dtype);
        fused::attention_softmax(&t[0], 0.35, &mask, Some(&additive)).unwrap()
    });
}

#[test]
fn target_log_probs_match_log_softmax() {
    let targets = [3u32, 0, 7, 7, 1];
    assert_fused_matches(
        "log-probs",
        &[(rand(&[5, 8], 11) * 3.0).unwrap()],
        1e-4,
        &|t| fused::target_log_probs(&t[0], &targets).unwrap(),
    );
    let bad = fused::target_log_probs(&rand(&[2, 4], 1), &[1, 4]).unwrap_err();
    assert!(bad.to_string().contains("outside the vocabulary"), "{bad}");
}

#[test]
fn attention_core_matches_the_composite_attention() {
    let (b, l, nh, nkv, d) = (2, 6, 4, 2, 8);
    let mask = AttentionMask {
        causal_past: Some(0),
        key_bias: Some(key_bias(b, l)),
        shared: None,
    };
    let inputs = [
        rand(&[b, l, nh, d], 12),
        rand(&[b, l, nkv, d], 13),
        rand(&[b, l, nkv, d], 14),
    ];
    let f = |t: &[Tensor]| {
        let rope = rope_tables(l, d, t[0].dtype());
        let scale = 1.0 / (d as f64).sqrt();
        if let Some(out) = fused::attention(&t[0], &t[1], &t[2], &rope, &mask, scale).unwrap() {
            return out;
        }
        // The composite reference: heads first, rotary, grouped scores, softmax.
        let q = fused::rope(&t[0].transpose(1, 2).unwrap(), &rope).unwrap();
        let k = fused::rope(&t[1].transpose(1, 2).unwrap(), &rope).unwrap();
        let v = t[2].transpose(1, 2).unwrap().contiguous().unwrap();
        let g = nh / nkv;
        let s = q
            .reshape((b, nkv, g * l, d))
            .unwrap()
            .matmul(&k.t().unwrap())
            .unwrap();
        let s = s.reshape((b, nh, l, l)).unwrap();
        let additive = additive_mask(b, l, 0, t[0].dtype());
        let p = fused::attention_softmax(&s, scale, &mask, Some(&additive)).unwrap();
        p.reshape((b, nkv, g * l, l))
            .unwrap()
            .matmul(&v)
            .unwrap()
            .reshape((b, nh, l, d))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .reshape((b, l, nh * d))
            .unwrap()
    };
    assert_fused_matches("attention", &inputs, 1e-4, &f);
}

/// Every parameter gradient of a padded, masked batch: the fused f32 model against
/// the composite f64 one built from the same weights.
#[test]
fn whole_model_gradients_match_the_composite_model() {
    assert_model_gradients_match(&tiny_config(true), None);
}

/// A Llama with biases under LoRA with dropout (the base frozen, as in LoRA SFT): the
/// fused adapter kernel's gradients are the composite path's, masks included.
#[test]
fn lora_model_gradients_with_dropout_match_the_composite_model() {
    let cfg = rmsweb::model::DecoderConfig {
        arch: rmsweb::model::arch::Arch {
            attention_bias: true,
            mlp_bias: true,
            ..rmsweb::model::arch::Arch::llama()
        },
        ..tiny_config(false)
    };
    let lora = rmsweb::model::LoraConfig {
        r: 4,
        alpha: 8.0,
        dropout: 0.2,
        target_modules: rmsweb::model::LoraConfig::ALL_LINEAR
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    assert_model_gradients_match(&cfg, Some(&lora));
}

/// A tiny model's log-probs and the gradients of its trainable variables (every
/// weight, or only the adapters of `lora`, B set nonzero and dropout on) agree between
/// f32 (fused kernels) and f64 (candle's composite ops).
fn assert_model_gradients_match(
    cfg: &rmsweb::model::DecoderConfig,
    lora: Option<&rmsweb::model::LoraConfig>,
) {
    let cfg = cfg.clone();
    let vocab = cfg.vocab_size;
    let w: HashMap<String, Tensor> = Decoder::random_weights(&cfg, 5)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, (v * 10.0).unwrap()))
        .collect();
    let ids: Vec<u32> = (0..2 * 9).map(|i| (i * 7 % vocab) as u32).collect();
    let key_mask = Tensor::from_vec(
        (0..2 * 9)
            .map(|i| if i == 9 || i == 10 { -1e9f32 } else { 0.0 })
            .collect::<Vec<_>>(),
        (2, 9),
        &Device::Cpu,
    )
    .unwrap();
    let grads = |dtype: DType| {
        let mut m =
            Decoder::from_weights(&cfg, w.clone(), dtype, &Device::Cpu, lora.is_none()).unwrap();
        if let Some(l) = lora {
            assert_eq!(m.add_lora(l, 3).unwrap(), 7 * cfg.num_hidden_layers);
            let b: HashMap<String, Tensor> = m
                .trainable_vars()
                .into_iter()
                .filter(|(n, _)| n.ends_with("lora_B.weight"))
                .map(|(n, v)| (n, rand(v.dims(), 17).to_dtype(dtype).unwrap()))
                .collect();
            m.load_params(&b).unwrap();
            m.dropout_key().set(Some(12));
        }
        let inp = Tensor::from_vec(ids.clone(), (2, 9), &Device::Cpu).unwrap();
        let h = m
            .forward_hidden_masked(&inp, 0, None, Some(&key_mask))
            .unwrap();
        let logits = m.logits(&h).unwrap().reshape((18, vocab)).unwrap();
        let targets: Vec<u32> = ids.iter().map(|t| (t + 1) % vocab as u32).collect();
        // Padding queries (all their keys masked) carry no loss, as in training.
        let keep: Vec<f64> = (0..18)
            .map(|i| if i == 9 || i == 10 { 0.0 } else { 1.0 })
            .collect();
        let keep = Tensor::from_vec(keep, 18, &Device::Cpu)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let lp = (fused::target_log_probs(&logits, &targets).unwrap() * keep).unwrap();
        let g = lp.sum_all().unwrap().backward().unwrap();
        let out: Vec<(String, Tensor)> = m
            .trainable_vars()
            .into_iter()
            .map(|(n, v)| {
                let g = g
                    .get(v.as_tensor())
                    .unwrap_or_else(|| panic!("no gradient for {n}"));
                (n, g.to_dtype(DType::F64).unwrap())
            })
            .collect();
        (lp.to_dtype(DType::F64).unwrap(), out)
    };
    let (lp32, g32) = grads(DType::F32);
    let (lp64, g64) = grads(DType::F64);
    let d = max_diff(&lp32, &lp64);
    assert!(d < 1e-3, "log-probs differ by {d}");
    assert_eq!(g32.len(), g64.len());
    for ((n, a), (_, b)) in g32.iter().zip(&g64) {
        let scale = b
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
            .max(1.0);
        let d = max_diff(a, b) / scale;
        assert!(d < 1e-3, "{n}: relative gradient difference {d}");
    }
}

/// The fused adapter kernel against its formula, `x Wᵀ + s·((x ⊙ m) Aᵀ) Bᵀ`, composed
/// from candle ops in f64: values and the gradients of x, A and B, with and without
/// dropout, through both base-product paths (a few rows, and gemm).
#[test]
fn lora_linear_matches_its_formula() {
    for p in [0.0f32, 0.3] {
        for rows in [3usize, 40] {
            let mask = fused::DropoutMask::new(21, p);
            let w = rand(&[24, 16], 1);
            let name = format!("lora_linear p={p} rows={rows}");
            let inputs = [
                rand(&[2, rows, 16], 2),
                rand(&[4, 16], 3),
                rand(&[24, 4], 4),
            ];
            assert_fused_matches(&name, &inputs, 1e-4, &|t| {
                let w = w.to_dtype(t[0].dtype()).unwrap();
                if t[0].dtype() == DType::F32 {
                    return fused::lora_linear(&t[0], &w, &t[1], &t[2], 0.5, mask)
                        .unwrap()
                        .expect("fused for f32 on the CPU");
                }
                let xd = match mask {
                    Some(m) => {
                        let f = Tensor::from_vec(
                            m.factors(t[0].elem_count()),
                            t[0].shape(),
                            &Device::Cpu,
                        )
                        .unwrap()
                        .to_dtype(DType::F64)
                        .unwrap();
                        (&t[0] * f).unwrap()
                    }
                    None => t[0].clone(),
                };
                let base = t[0].broadcast_matmul(&w.t().unwrap()).unwrap();
                let up = xd
                    .broadcast_matmul(&t[1].t().unwrap())
                    .unwrap()
                    .broadcast_matmul(&t[2].t().unwrap())
                    .unwrap();
                (base + (up * 0.5).unwrap()).unwrap()
            });
        }
    }
}
