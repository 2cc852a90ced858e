//! Llama (`LlamaForCausalLM`) folders written by transformers 5 and a PEFT adapter on
//! one (tests/data/llama/make_fixtures.py): logits within 1e-4 of transformers', the
//! same greedy tokens, and each part the family switches on (biases, the llama3
//! rotary scaling, the adapter) shown to matter to the references.

use super::hf::{TOLERANCE, check_against_transformers, logits, max_abs_diff, references};
use candle_core::{DType, Device, Tensor};
use rmsweb::model::rope::RopeScaling;
use rmsweb::model::{Decoder, LocalModelPolicy, weights};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/llama")
        .join(name)
}

fn load(name: &str) -> LocalModelPolicy {
    LocalModelPolicy::load(&fixture(name), None, &Device::Cpu)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// The folder's model rebuilt with `change` made to its weights differs from
/// transformers' logits by far more than the tolerance.
fn assert_matters(name: &str, what: &str, change: impl Fn(&str, Tensor) -> Tensor) {
    let folder = fixture(name);
    let p = load(name);
    let w = weights::load_dir(&folder, &Device::Cpu).unwrap();
    let w = w.into_iter().map(|(k, t)| {
        let t = change(&k, t);
        (k, t)
    });
    let other = Decoder::from_weights(
        &p.model.config,
        w.collect(),
        DType::F32,
        &Device::Cpu,
        false,
    )
    .unwrap();
    let (input, theirs, _) = references(&folder);
    let d = max_abs_diff(&logits(&other, &input), &theirs);
    eprintln!("  ({what} would differ by {d:.2})");
    assert!(d > 100.0 * TOLERANCE, "{name}: {what} changes only {d}");
}

#[test]
fn tied_llama_matches_transformers() {
    let p = load("tied");
    let c = &p.model.config;
    assert_eq!(c.arch.spec.model_type, "llama");
    assert!(!c.arch.spec.qk_norm && c.tie_word_embeddings);
    // LlamaConfig's defaults: head_dim = hidden / heads.
    assert_eq!(c.head_dim(), 8);
    check_against_transformers("llama tied", &p, &fixture("tied"));
}

#[test]
fn untied_llama_with_attention_and_mlp_biases_matches_transformers() {
    let p = load("bias-untied");
    let c = &p.model.config;
    assert!(c.arch.attention_bias && c.arch.mlp_bias && !c.tie_word_embeddings);
    check_against_transformers("llama bias-untied", &p, &fixture("bias-untied"));
    let zero_bias = |k: &str, t: Tensor| {
        if k.ends_with(".bias") {
            t.zeros_like().unwrap()
        } else {
            t
        }
    };
    assert_matters("bias-untied", "zero biases", zero_bias);
    // Every bias is a named parameter (a merged export writes them).
    let names: Vec<String> = p.model.named_params().into_iter().map(|(n, _)| n).collect();
    for m in ["self_attn.o_proj", "mlp.down_proj"] {
        let n = format!("model.layers.1.{m}.bias");
        assert!(names.contains(&n), "{n} missing");
    }
}

#[test]
fn llama3_rope_scaling_on_llama_matches_transformers() {
    let p = load("llama3-rope");
    assert!(matches!(
        p.model.config.rope_scaling,
        Some(RopeScaling::Llama3(_))
    ));
    let folder = fixture("llama3-rope");
    check_against_transformers("llama3-rope", &p, &folder);
    let mut cfg = p.model.config.clone();
    cfg.rope_scaling = None;
    let w = weights::load_dir(&folder, &Device::Cpu).unwrap();
    let plain = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let (input, theirs, _) = references(&folder);
    let d = max_abs_diff(&logits(&plain, &input), &theirs);
    assert!(d > 100.0 * TOLERANCE, "plain rope differs by only {d}");
}

#[test]
fn peft_adapter_on_llama_with_biases_matches_peft_merged_or_not() {
    let folder = fixture("peft-adapter");
    let p = LocalModelPolicy::load(&fixture("bias-untied"), Some(&folder), &Device::Cpu).unwrap();
    check_against_transformers("llama peft-adapter", &p, &folder);
    let r =
        candle_core::safetensors::load(folder.join("reference.safetensors"), &Device::Cpu).unwrap();
    // Merged into the base weights (biases untouched), as merge_and_unload.
    let mut merged = LocalModelPolicy::load(&fixture("bias-untied"), Some(&folder), &Device::Cpu)
        .unwrap()
        .model;
    merged.merge_lora().unwrap();
    assert!(merged.linears().iter().all(|l| l.lora.is_none()));
    let (input, _, _) = references(&folder);
    let d = max_abs_diff(&logits(&merged, &input), &r["merged_logits"]);
    eprintln!("llama peft-adapter merged: max |logit diff| {d:.2e}");
    assert!(d < TOLERANCE, "merged logits differ by {d}");
    let base = load("bias-untied");
    let d = max_abs_diff(&logits(&base.model, &input), &r["logits"]);
    assert!(d > 100.0 * TOLERANCE, "the adapter changes only {d}");
}

#[test]
fn a_llama_folder_with_qwen3_weights_or_the_reverse_is_refused_by_weight_name() {
    let llama = load("tied").model.config.clone();
    let mut qwen3 = llama.clone();
    qwen3.arch = rmsweb::model::arch::Arch::qwen3();
    let w = weights::load_dir(fixture("tied"), &Device::Cpu).unwrap();
    let e = Decoder::from_weights(&qwen3, w, DType::F32, &Device::Cpu, false)
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("self_attn.q_norm.weight` is missing"),
        "{e:#}"
    );
    let w = Decoder::random_weights(&qwen3, 1).unwrap();
    let e = Decoder::from_weights(&llama, w, DType::F32, &Device::Cpu, false)
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("k_norm.weight` is not part of a llama decoder"),
        "{e:#}"
    );
}
