//! The Qwen3-VL text decoder and the joined model against candle-transformers 0.11.1's
//! `Qwen3VLModel`, against the plain Qwen3 decoder (text only), against itself with a
//! KV cache, and its DeepStack gradients against finite differences.
//!
//! candle-transformers' port differs from transformers in two ways that shape the
//! comparison: it rotates by 1-D positions (no M-RoPE), and its prompt pass has no
//! causal mask (`attention_mask` is built only for one-token steps). So it is fed one
//! token at a time through its KV cache (causal), with images of one merged token each
//! (grid [1, 2, 2]), whose M-RoPE positions are exactly the 1-D ones. M-RoPE of
//! larger images is checked by `model::vl::mrope`'s tests (positions written out from
//! transformers' `get_rope_index`) and here through the cache and gradients.

use super::{
    ct_vision_config, max_abs_diff, seeded_normal, tiny_vision, to_f64, vision_test_weights,
};
use candle_core::{DType, Device, Tensor, Var};
use rmsweb::model::vl::{
    Deepstack, Gelu, MropeLayout, MropePositions, Qwen3Vl, VisionModel, VlCache, VlImages, VlText,
    VlTextConfig, VlTokenIds, rope_index,
};
use rmsweb::model::{Decoder, DecoderConfig};
use std::collections::HashMap;

const IDS: VlTokenIds = VlTokenIds {
    image_token_id: 1,
    vision_start_token_id: 3,
};
const VISION_END: u32 = 4;

/// A 3-layer decoder 24 wide (the tiny tower's `out_hidden_size`), grouped-query
/// attention (2 heads over 1 kv head of 12), M-RoPE sections [2, 2, 2].
fn tiny_text() -> VlTextConfig {
    VlTextConfig {
        decoder: DecoderConfig {
            arch: rmsweb::model::arch::Arch::qwen3(),
            vocab_size: 50,
            hidden_size: 24,
            intermediate_size: 40,
            num_hidden_layers: 3,
            num_attention_heads: 2,
            num_key_value_heads: Some(1),
            head_dim: Some(12),
            rms_norm_eps: 1e-6,
            rope_theta: 10_000.0,
            rope_scaling: None,
            tie_word_embeddings: false,
            max_position_embeddings: 64,
            eos_token_id: None,
        },
        mrope: MropeLayout::interleaved([2, 2, 2]),
    }
}

/// Text weights at test scale (matrices std 1/sqrt(fan-in), embeddings std 1, norm
/// weights around 1), checkpoint names.
fn text_test_weights(cfg: &VlTextConfig, seed: u64) -> HashMap<String, Tensor> {
    let mut names: Vec<(String, Vec<usize>)> = VlText::random_weights(cfg, 0)
        .unwrap()
        .into_iter()
        .map(|(n, t)| (n, t.dims().to_vec()))
        .collect();
    names.sort();
    names
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let z = seeded_normal(&shape, seed * 1000 + i as u64);
            let t = if shape.len() == 1 {
                ((z * 0.2).unwrap() + 1.0).unwrap()
            } else if name.contains("embed_tokens") {
                z
            } else {
                (z / (shape[1] as f64).sqrt()).unwrap()
            };
            (name, t)
        })
        .collect()
}

/// Every weight of the tiny model: tower (seed 7, as the vision tests) and decoder.
fn all_weights(text: &VlTextConfig) -> HashMap<String, Tensor> {
    let (vcfg, _) = tiny_vision();
    let mut w = vision_test_weights(&vcfg, 7);
    w.extend(text_test_weights(text, 3));
    w
}

fn ours(text: &VlTextConfig, weights: &HashMap<String, Tensor>, act: Gelu) -> Qwen3Vl {
    let (vcfg, _) = tiny_vision();
    let dev = Device::Cpu;
    let vision = VisionModel::from_weights(&vcfg, weights.clone(), DType::F32, &dev)
        .unwrap()
        .with_merger_act(act);
    let text = VlText::from_weights(text, weights, DType::F32, &dev, false).unwrap();
    Qwen3Vl::new(vision, text, IDS).unwrap()
}

/// candle-transformers' model over the same weights (its LM head has a bias: zero).
fn theirs(
    text: &VlTextConfig,
    weights: &HashMap<String, Tensor>,
) -> candle_transformers::models::qwen3_vl::Qwen3VLModel {
    use candle_transformers::models::qwen3_vl::{Config, Qwen3VLModel};
    let (vcfg, _) = tiny_vision();
    let dev = Device::Cpu;
    let d = &text.decoder;
    let mut all = weights.clone();
    all.insert(
        "lm_head.bias".into(),
        Tensor::zeros(d.vocab_size, DType::F32, &dev).unwrap(),
    );
    let cfg: Config = serde_json::from_value(serde_json::json!({
        "text_config": {
            "head_dim": d.head_dim(), "vocab_size": d.vocab_size,
            "hidden_size": d.hidden_size, "intermediate_size": d.intermediate_size,
            "num_hidden_layers": d.num_hidden_layers,
            "num_attention_heads": d.num_attention_heads,
            "num_key_value_heads": d.kv_heads(), "hidden_act": "silu",
            "max_position_embeddings": d.max_position_embeddings,
            "rms_norm_eps": d.rms_norm_eps, "tie_word_embeddings": false,
            "rope_theta": d.rope_theta, "sliding_window": null
        },
        "vision_config": ct_vision_config(&vcfg),
        "image_token_id": IDS.image_token_id, "video_token_id": 2,
        "vision_start_token_id": IDS.vision_start_token_id,
        "vision_end_token_id": VISION_END
    }))
    .unwrap();
    Qwen3VLModel::new(
        &cfg,
        candle_nn::VarBuilder::from_tensors(all, DType::F32, &dev),
    )
    .unwrap()
}

/// `vision_start image vision_end` around `grid`'s placeholder tokens.
fn image_run(tokens_per_image: usize) -> Vec<u32> {
    let mut v = vec![IDS.vision_start_token_id];
    v.extend(vec![IDS.image_token_id; tokens_per_image]);
    v.push(VISION_END);
    v
}

/// Text, two one-token images, text: every position's logits equal
/// candle-transformers' (fed one token at a time), DeepStack features included.
#[test]
fn vl_model_matches_candle_transformers() {
    let text = tiny_text();
    let weights = all_weights(&text);
    let (vcfg, _) = tiny_vision();
    let dev = Device::Cpu;
    let grid = [1usize, 2, 2];
    let rows = grid.iter().product::<usize>();
    let pixels = seeded_normal(&[2 * rows, vcfg.patch_dim()], 11);
    let mut tokens = vec![10, 11, 12];
    tokens.extend(image_run(1));
    tokens.extend([13, 14]);
    tokens.extend(image_run(1));
    tokens.extend([15, 16, 17]);
    let grids = [grid, grid];
    let pos = rope_index(&tokens, &grids, &IDS, vcfg.spatial_merge_size).unwrap();
    assert_eq!(pos, MropePositions::text(0, tokens.len()).unwrap());

    let model = ours(&text, &weights, Gelu::Tanh);
    let images = VlImages {
        pixel_values: &pixels,
        grid_thw: &grids,
    };
    let got = model.forward(&tokens, Some(images), None).unwrap();
    assert_eq!(got.dims(), [1, tokens.len(), 50]);
    let got = got.squeeze(0).unwrap();

    let ct = theirs(&text, &weights);
    let mut image = 0;
    let mut worst = 0f64;
    for (i, &t) in tokens.iter().enumerate() {
        let ids = Tensor::new(&[[t]], &dev).unwrap();
        let (px, g, pad) = if t == IDS.image_token_id {
            image += 1;
            (
                Some(pixels.narrow(0, (image - 1) * rows, rows).unwrap()),
                Some(Tensor::new(&[[1u32, 2, 2]], &dev).unwrap()),
                vec![vec![(0, 1)]],
            )
        } else {
            (None, None, vec![vec![]])
        };
        let want = ct
            .forward(&ids, px, None, g, None, vec![1], pad, vec![], &[i])
            .unwrap();
        let d = max_abs_diff(&to_f64(&got.get(i).unwrap()), &to_f64(&want));
        assert!(d < 1e-4, "position {i} (token {t}): differs by {d}");
        worst = worst.max(d);
    }
    eprintln!("candle-transformers: max |diff| of every position's logits {worst:.3e}");
    // The mergers' GELU (erf in transformers, tanh in candle-transformers) shows: the
    // image tokens reach the logits.
    let erf = ours(&text, &weights, Gelu::Erf)
        .forward(&tokens, Some(images), None)
        .unwrap();
    let d = max_abs_diff(&to_f64(&erf.squeeze(0).unwrap()), &to_f64(&got));
    assert!(d > 1e-4, "the image does not reach the logits ({d})");
}

/// Without an image, the VL decoder is the plain Qwen3 decoder over the same weights
/// (M-RoPE with three equal positions is 1-D RoPE), prompt and cached continuation.
#[test]
fn vl_text_without_images_equals_qwen3() {
    let text = tiny_text();
    let weights = all_weights(&text);
    let dev = Device::Cpu;
    let plain: HashMap<String, Tensor> = weights
        .iter()
        .filter_map(|(n, t)| {
            let n = if n == "lm_head.weight" {
                n.clone()
            } else {
                n.strip_prefix("model.language_model.")
                    .map(|r| format!("model.{r}"))?
            };
            Some((n, t.clone()))
        })
        .collect();
    let qwen = Decoder::from_weights(&text.decoder, plain, DType::F32, &dev, false).unwrap();
    let model = ours(&text, &weights, Gelu::Erf);
    let tokens: Vec<u32> = vec![5, 9, 17, 23, 42, 8, 30, 11, 2];
    let ids = Tensor::new(tokens.as_slice(), &dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let want = qwen.forward(&ids, 0, None).unwrap();
    let got = model.forward(&tokens, None, None).unwrap();
    let d = max_abs_diff(&to_f64(&got), &to_f64(&want));
    assert!(d < 1e-6, "prompt: differs from the plain decoder by {d}");
    assert!(to_f64(&want).iter().any(|v| v.abs() > 0.1));

    let (mut kv, mut vc) = (rmsweb::model::KvCache::new(), VlCache::new());
    qwen.forward(&ids.narrow(1, 0, 5).unwrap(), 0, Some(&mut kv))
        .unwrap();
    model.forward(&tokens[..5], None, Some(&mut vc)).unwrap();
    let want = qwen
        .forward(&ids.narrow(1, 5, 4).unwrap(), 5, Some(&mut kv))
        .unwrap();
    let got = model.forward(&tokens[5..], None, Some(&mut vc)).unwrap();
    let d = max_abs_diff(&to_f64(&got), &to_f64(&want));
    assert!(
        d < 1e-6,
        "continuation: differs from the plain decoder by {d}"
    );
}

/// Tokens of a prompt with a 2 x 3-token image (grid [1, 4, 6]) and a one-token image,
/// then text; and the images' pixels.
fn two_image_prompt() -> (Vec<u32>, Vec<[usize; 3]>, Tensor) {
    let (vcfg, _) = tiny_vision();
    let grids = vec![[1usize, 4, 6], [1, 2, 2]];
    let mut tokens = vec![20, 21];
    tokens.extend(image_run(6));
    tokens.extend([22]);
    tokens.extend(image_run(1));
    tokens.extend([23, 24, 25, 26]);
    let rows: usize = grids.iter().map(|g| g.iter().product::<usize>()).sum();
    (tokens, grids, seeded_normal(&[rows, vcfg.patch_dim()], 5))
}

/// A prompt with images through a cache, then text token by token: the logits of the
/// full forward at every position, in both kinds of cache; images after the prompt
/// are refused.
#[test]
fn vl_kv_cache_decoding_equals_full_forward() {
    let text = tiny_text();
    let weights = all_weights(&text);
    let model = ours(&text, &weights, Gelu::Erf);
    let (tokens, grids, pixels) = two_image_prompt();
    let images = VlImages {
        pixel_values: &pixels,
        grid_thw: &grids,
    };
    let pos = rope_index(&tokens, &grids, &IDS, 2).unwrap();
    assert!(pos.delta < 0, "the image's positions are not 1-D");
    let full = model.forward(&tokens, Some(images), None).unwrap();
    let prompt = tokens.len() - 3;
    for (kind, mut cache) in [
        ("concat", VlCache::new()),
        ("buffer", VlCache::for_decoding()),
    ] {
        let mut parts = vec![
            model
                .forward(&tokens[..prompt], Some(images), Some(&mut cache))
                .unwrap(),
        ];
        for i in prompt..tokens.len() {
            parts.push(
                model
                    .forward(&tokens[i..i + 1], None, Some(&mut cache))
                    .unwrap(),
            );
        }
        assert_eq!(cache.len(), tokens.len());
        let got = Tensor::cat(&parts, 1).unwrap();
        let d = max_abs_diff(&to_f64(&got), &to_f64(&full));
        assert!(d < 1e-5, "{kind}: cached decoding differs by {d}");
        let e = model
            .forward(&tokens[..4], Some(images), Some(&mut cache))
            .unwrap_err()
            .to_string();
        assert!(e.contains("first call"), "{e}");
    }
    // The positions matter: the same prompt with 1-D positions gives other logits.
    let flat = model
        .text()
        .forward_hidden(
            &model
                .text()
                .embed(
                    &Tensor::new(tokens.as_slice(), &Device::Cpu)
                        .unwrap()
                        .unsqueeze(0)
                        .unwrap(),
                )
                .unwrap(),
            &MropePositions::text(0, tokens.len()).unwrap(),
            None,
            None,
        )
        .unwrap();
    let flat = model.text().logits(&flat).unwrap();
    assert!(max_abs_diff(&to_f64(&flat), &to_f64(&full)) > 1e-3);
}

/// f64 gradients of a loss on the logits with respect to the input embeddings and
/// both DeepStack features, against central finite differences, at M-RoPE positions
/// of a 6-token image.
#[test]
fn vl_deepstack_gradients_match_finite_differences() {
    let text = tiny_text();
    let weights = all_weights(&text);
    let dev = Device::Cpu;
    let model = VlText::from_weights(&text, &weights, DType::F64, &dev, false).unwrap();
    let (tokens, grids, _) = two_image_prompt();
    let positions = rope_index(&tokens, &grids, &IDS, 2).unwrap();
    let image_rows: Vec<u32> = (0..tokens.len() as u32)
        .filter(|&i| tokens[i as usize] == IDS.image_token_id)
        .collect();
    let (l, n, h) = (tokens.len(), image_rows.len(), 24);
    let f64t = |t: Tensor| t.to_dtype(DType::F64).unwrap();
    let embeds = Var::from_tensor(&f64t(seeded_normal(&[1, l, h], 40))).unwrap();
    let feats: Vec<Var> = (0..2)
        .map(|k| Var::from_tensor(&f64t(seeded_normal(&[n, h], 41 + k))).unwrap())
        .collect();
    let probe = f64t(seeded_normal(&[1, l, 50], 43));
    let loss = |e: &Tensor, f: &[Tensor]| -> Tensor {
        let ds = Deepstack {
            positions: image_rows.clone(),
            features: f.to_vec(),
        };
        let hidden = model
            .forward_hidden(e, &positions, None, Some(&ds))
            .unwrap();
        (model.logits(&hidden).unwrap() * &probe)
            .unwrap()
            .sum_all()
            .unwrap()
    };
    let base: Vec<Tensor> = feats.iter().map(|v| v.as_tensor().clone()).collect();
    let grads = loss(embeds.as_tensor(), &base).backward().unwrap();
    let eps = 1e-5;
    let bump = |t: &Tensor, idx: usize, by: f64| -> Tensor {
        let mut v = t.flatten_all().unwrap().to_vec1::<f64>().unwrap();
        v[idx] += by;
        Tensor::from_vec(v, t.shape(), &dev).unwrap()
    };
    let value = |t: Tensor| t.to_scalar::<f64>().unwrap();
    let mut checked = 0;
    // Entries of each feature (image rows 0, 3, 6) and of a text and an image embedding.
    for which in 0..3 {
        let (target, entries): (&Var, Vec<usize>) = match which {
            0 | 1 => (&feats[which], vec![0, 3 * h + 5, 6 * h + 23]),
            _ => (&embeds, vec![h + 2, 4 * h + 7, (l - 1) * h + 11]),
        };
        let g = to_f64(grads.get(target.as_tensor()).expect("no gradient"));
        for &idx in &entries {
            let eval = |by: f64| {
                let t = bump(target.as_tensor(), idx, by);
                match which {
                    0 | 1 => {
                        let mut f = base.clone();
                        f[which] = t;
                        value(loss(embeds.as_tensor(), &f))
                    }
                    _ => value(loss(&t, &base)),
                }
            };
            let numeric = (eval(eps) - eval(-eps)) / (2.0 * eps);
            let err = (g[idx] - numeric).abs() / numeric.abs().max(1e-3);
            assert!(
                err < 1e-5,
                "input {which} entry {idx}: analytic {} vs numeric {numeric}",
                g[idx]
            );
            assert!(
                numeric.abs() > 1e-6,
                "input {which} entry {idx} has no effect"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 9);
}
