//! The candle Qwen3 decoder, LoRA, PEFT export, chat template masks, SFT runs.

use candle_core::{DType, Device, IndexOp, Tensor};
use rmsweb::action::Action;
use rmsweb::model::chat_template::{ChatTemplate, Encoded, Message};
use rmsweb::model::lora::{LoraConfig, Param};
use rmsweb::model::{Decoder, DecoderConfig, KvCache, LocalModelPolicy, peft, tokenizer, weights};
use rmsweb::train::sft::{self, SftConfig, micro_batch_nll};
use rmsweb::trajectory::{Dataset, ModelOutput, Outcome, State, Step, Task, Trajectory};
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub(crate) fn tiny_config(tied: bool) -> DecoderConfig {
    DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
        vocab_size: 61,
        hidden_size: 32,
        intermediate_size: 48,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        head_dim: Some(8),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: tied,
        max_position_embeddings: 64,
        eos_token_id: None,
    }
}

/// Random weights with non-trivial norm scales, saved to and reloaded from safetensors.
fn saved_model(dir: &Path, cfg: &DecoderConfig, seed: u64) -> HashMap<String, Tensor> {
    let mut w = Decoder::random_weights(cfg, seed).unwrap();
    for (k, v) in w.iter_mut() {
        if k.ends_with("norm.weight") || k.ends_with("layernorm.weight") {
            *v = (v.rand_like(0.5, 1.5).unwrap()).clone();
        } else {
            // Larger weights than the 0.02 init so that every layer matters.
            *v = (&*v * 10.0).unwrap();
        }
    }
    weights::save_file(&w, &dir.join("model.safetensors")).unwrap();
    cfg.save(dir).unwrap();
    weights::load_dir(dir, &Device::Cpu).unwrap()
}

pub(crate) fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a.to_dtype(DType::F64).unwrap() - b.to_dtype(DType::F64).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

#[test]
fn forward_matches_candle_transformers_qwen3() {
    for tied in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = tiny_config(tied);
        let w = saved_model(dir.path(), &cfg, 7);
        let ours = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
        let theirs_cfg: candle_transformers::models::qwen3::Config =
            serde_json::from_value(cfg.to_hf_json()).unwrap();
        let vb = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(
                &[dir.path().join("model.safetensors")],
                DType::F32,
                &Device::Cpu,
            )
            .unwrap()
        };
        let mut theirs =
            candle_transformers::models::qwen3::ModelForCausalLM::new(&theirs_cfg, vb).unwrap();
        let ids: Vec<u32> = vec![3, 17, 42, 5, 60, 9, 9, 1, 33, 20, 11];
        let input = Tensor::new(ids.as_slice(), &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let ours_logits = ours.forward(&input, 0, None).unwrap();
        let last = ours_logits.i((0, ids.len() - 1)).unwrap();
        let theirs_last = theirs.forward(&input, 0).unwrap().flatten_all().unwrap();
        let d = max_diff(&last, &theirs_last);
        let scale = max_diff(&last, &last.zeros_like().unwrap());
        assert!(scale > 0.1, "logits too small to compare: {scale}");
        assert!(d < 1e-4, "tied={tied}: max |Δ| = {d}");
    }
}

#[test]
fn gradients_match_finite_differences_in_f64() {
    let cfg = tiny_config(false);
    let w: HashMap<String, Tensor> = Decoder::random_weights(&cfg, 3)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, (v * 10.0).unwrap()))
        .collect();
    let model = Decoder::from_weights(&cfg, w, DType::F64, &Device::Cpu, true).unwrap();
    let sample = Encoded {
        ids: vec![1, 5, 9, 14, 2, 40, 7, 33],
        mask: vec![false, false, false, true, true, false, true, true],
    };
    let loss = |m: &Decoder| micro_batch_nll(m, &[&sample], 0, 0.0).unwrap().weighted;
    let l0 = loss(&model);
    let grads = l0.backward().unwrap();
    let vars = model.trainable_vars();
    let mut checked = 0;
    for (name, var) in &vars {
        if !(name.contains("layers.1.self_attn.q_norm")
            || name.contains("layers.0.self_attn.k_proj")
            || name.contains("layers.0.mlp.down_proj")
            || name.contains("embed_tokens")
            || name == "model.norm.weight"
            || name.contains("lm_head"))
        {
            continue;
        }
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("no gradient for {name}"))
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        let base = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        // Check the coordinates with the largest analytic gradients.
        let mut order: Vec<usize> = (0..g.len()).collect();
        order.sort_by(|&a, &b| g[b].abs().total_cmp(&g[a].abs()));
        for &i in order.iter().take(3) {
            let eps = 1e-5;
            let mut plus = base.clone();
            plus[i] += eps;
            var.set(&Tensor::from_vec(plus, var.shape(), &Device::Cpu).unwrap())
                .unwrap();
            let lp = loss(&model).to_scalar::<f64>().unwrap();
            let mut minus = base.clone();
            minus[i] -= eps;
            var.set(&Tensor::from_vec(minus, var.shape(), &Device::Cpu).unwrap())
                .unwrap();
            let lm = loss(&model).to_scalar::<f64>().unwrap();
            var.set(&Tensor::from_vec(base.clone(), var.shape(), &Device::Cpu).unwrap())
                .unwrap();
            let fd = (lp - lm) / (2.0 * eps);
            let rel = (fd - g[i]).abs() / g[i].abs().max(1e-6);
            assert!(rel < 1e-4, "{name}[{i}]: analytic {} vs numeric {fd}", g[i]);
            checked += 1;
        }
    }
    assert_eq!(checked, 18);
}

fn lora_cfg(targets: &[&str]) -> LoraConfig {
    LoraConfig {
        r: 4,
        alpha: 8.0,
        dropout: 0.0,
        target_modules: targets.iter().map(|s| s.to_string()).collect(),
    }
}

/// Gives every adapter's B random values (a fresh B is zero).
fn randomize_b(model: &Decoder) {
    for (name, p) in model.named_params() {
        if name.ends_with("lora_B.weight")
            && let Param::Trainable(v) = p
        {
            v.set(&v.as_tensor().randn_like(0.0, 0.5).unwrap()).unwrap();
        }
    }
}

#[test]
fn lora_fresh_is_identity_and_merged_equals_unmerged() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(false);
    let w = saved_model(dir.path(), &cfg, 11);
    let mut model = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let input = Tensor::new(&[[4u32, 8, 15, 16, 23, 42]], &Device::Cpu).unwrap();
    let base = model.forward(&input, 0, None).unwrap();
    let n = model.add_lora(&LoraConfig::paper(), 1).unwrap();
    assert_eq!(n, 14, "7 linear layers × 2 decoder layers");
    // The base is frozen: only adapters train.
    assert!(
        model
            .trainable_vars()
            .iter()
            .all(|(n, _)| n.contains(".lora_"))
    );
    assert!(max_diff(&model.forward(&input, 0, None).unwrap(), &base) < 1e-6);
    let mut model = {
        let w = weights::load_dir(dir.path(), &Device::Cpu).unwrap();
        let mut m = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
        m.add_lora(&lora_cfg(&["q_proj", "v_proj", "down_proj"]), 1)
            .unwrap();
        m
    };
    randomize_b(&model);
    let unmerged = model.forward(&input, 0, None).unwrap();
    assert!(max_diff(&unmerged, &base) > 1e-3, "adapter had no effect");
    model.merge_lora().unwrap();
    assert!(model.trainable_vars().is_empty());
    let merged = model.forward(&input, 0, None).unwrap();
    assert!(max_diff(&merged, &unmerged) < 1e-4);
}

#[test]
fn kv_cache_decoding_equals_full_forward() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(true);
    let w = saved_model(dir.path(), &cfg, 5);
    let model = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let ids: Vec<u32> = vec![1, 2, 3, 50, 7, 8, 9, 10, 30, 31];
    let full = model
        .forward(
            &Tensor::new(ids.as_slice(), &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap(),
            0,
            None,
        )
        .unwrap();
    // The differentiable cache, the sampling cache, and a sampling cache whose
    // buffers (8 positions) fill up and grow on the way.
    for (name, mut cache) in [
        ("differentiable", KvCache::new()),
        ("decoding", KvCache::for_decoding()),
        ("decoding, growing", KvCache::for_decoding_with_headroom(1)),
    ] {
        let head = Tensor::new(&ids[..6], &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let first = model.forward(&head, 0, Some(&mut cache)).unwrap();
        assert!(max_diff(&first, &full.narrow(1, 0, 6).unwrap()) < 1e-5);
        // Two new tokens at once (causal among themselves), then one at a time.
        for (p, n) in [(6, 2), (8, 1), (9, 1)] {
            let x = Tensor::new(&ids[p..p + n], &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let step = model.forward(&x, p, Some(&mut cache)).unwrap();
            assert!(
                max_diff(&step, &full.narrow(1, p, n).unwrap()) < 1e-5,
                "position {p} ({name})"
            );
        }
        assert_eq!(cache.len(), ids.len());
    }
}

/// A policy's next prompt encodes only what differs from its last: over prompts that
/// share a prefix, none, or everything, reusing decodes exactly what a fresh cache
/// does, greedy and sampled, with and without a schema.
#[test]
fn prompt_reuse_decodes_what_a_fresh_cache_decodes() {
    use rmsweb::model::prefix::PromptReuse;
    use rmsweb::model::sample::{SampleConfig, generate_reusing, generate_with};
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(false);
    let w = saved_model(dir.path(), &cfg, 11);
    let model = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let prompts: [&[u32]; 5] = [
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &[1, 2, 3, 4, 5, 9, 10],
        &[20, 21, 22],
        &[20, 21, 22],
        &[1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13],
    ];
    // No stop token: every decoding runs its 12 tokens.
    let stop: [u32; 0] = [];
    for temperature in [0.0, 1.0] {
        let sc = SampleConfig {
            temperature,
            max_new_tokens: 12,
            seed: 3,
            ..SampleConfig::default()
        };
        let reuse = PromptReuse::default();
        for p in prompts {
            let fresh = generate_with(&model, p, &stop, &sc, None).unwrap();
            let reused = generate_reusing(&model, p, &stop, &sc, None, Some(&reuse)).unwrap();
            assert_eq!(reused, fresh, "prompt {p:?} at temperature {temperature}");
            assert_eq!(fresh.len(), 12);
        }
        // What is kept is the prompt's cache: taking it back for a prompt that
        // extends the last one reuses all of the last one.
        let (cache, kept) = reuse
            .take(&[1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14])
            .unwrap();
        assert_eq!(kept, 11);
        assert_eq!(cache.len(), 11);
    }
}

#[test]
fn peft_export_has_peft_key_names_and_config_and_roundtrips() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(false);
    let w = saved_model(dir.path(), &cfg, 2);
    let mut model = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let lcfg = LoraConfig {
        dropout: 0.05,
        ..lora_cfg(&LoraConfig::ALL_LINEAR)
    };
    model.add_lora(&lcfg, 9).unwrap();
    randomize_b(&model);
    let out = dir.path().join("adapter");
    peft::export(&model, &lcfg, "/models/base", &out).unwrap();
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("adapter_config.json")).unwrap())
            .unwrap();
    assert_eq!(c["peft_type"], "LORA");
    assert_eq!(c["task_type"], "CAUSAL_LM");
    assert_eq!(c["r"], 4);
    assert_eq!(c["lora_alpha"], 8.0);
    assert!((c["lora_dropout"].as_f64().unwrap() - 0.05).abs() < 1e-6);
    assert_eq!(c["base_model_name_or_path"], "/models/base");
    assert_eq!(c["target_modules"].as_array().unwrap().len(), 7);
    let t = weights::load_file(&out.join("adapter_model.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(t.len(), 2 * 7 * 2);
    let a = &t["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"];
    assert_eq!(a.dims(), &[4, 32]);
    let b = &t["base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"];
    assert_eq!(b.dims(), &[32, 4]);
    assert!(t.contains_key("base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight"));
    // The policy loads base + adapter and merges: same logits as the live model.
    let input = Tensor::new(&[[1u32, 2, 3, 4]], &Device::Cpu).unwrap();
    let live = model.forward(&input, 0, None).unwrap();
    let (back_cfg, tensors) = peft::import(&out, &Device::Cpu).unwrap();
    assert_eq!(back_cfg, lcfg);
    let w = weights::load_dir(dir.path(), &Device::Cpu).unwrap();
    let mut re = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    re.add_lora(&back_cfg, 0).unwrap();
    re.load_params(&tensors).unwrap();
    re.merge_lora().unwrap();
    assert!(max_diff(&re.forward(&input, 0, None).unwrap(), &live) < 1e-4);
}

fn chat() -> Vec<Message> {
    vec![
        Message::new("system", "You are a web agent."),
        Message::new("user", "Task: click Submit"),
        Message::new("assistant", r#"{"action":[{"click":{"index":1}}]}"#),
        Message::new("user", "Next?"),
        Message::new("assistant", r#"{"action":[{"done":{"text":"ok"}}]}"#),
    ]
}

fn small_tokenizer() -> tokenizers::Tokenizer {
    let t = ChatTemplate::chatml();
    let text = t.render(&chat(), false).unwrap();
    tokenizer::train_bpe(std::iter::repeat_n(text, 20), 400, 2).unwrap()
}

/// Contiguous runs of masked tokens, decoded.
pub(crate) fn masked_text(tok: &tokenizers::Tokenizer, e: &Encoded) -> Vec<String> {
    let mut runs = Vec::new();
    let mut cur = Vec::new();
    for (id, m) in e.ids.iter().zip(&e.mask) {
        if *m {
            cur.push(*id);
        } else if !cur.is_empty() {
            runs.push(tok.decode(&cur, false).unwrap());
            cur.clear();
        }
    }
    if !cur.is_empty() {
        runs.push(tok.decode(&cur, false).unwrap());
    }
    runs
}

#[test]
fn chat_template_masks_only_assistant_tokens() {
    let tok = small_tokenizer();
    let e = ChatTemplate::chatml().encode(&tok, &chat()).unwrap();
    assert_eq!(e.ids.len(), e.mask.len());
    assert_eq!(
        masked_text(&tok, &e),
        vec![
            r#"{"action":[{"click":{"index":1}}]}<|im_end|>"#.to_string(),
            r#"{"action":[{"done":{"text":"ok"}}]}<|im_end|>"#.to_string(),
        ]
    );
    // A template from tokenizer_config.json (Qwen-style, with a system default).
    let dir = tempfile::tempdir().unwrap();
    let tpl = r"{%- if messages[0].role != 'system' %}{{- '<|im_start|>system\nDefault.<|im_end|>\n' }}{%- endif %}{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content.strip() + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}";
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        json!({"chat_template": tpl}).to_string(),
    )
    .unwrap();
    let t = ChatTemplate::for_model_dir(dir.path()).unwrap();
    let msgs = &chat()[1..3];
    let text = t.render(msgs, false).unwrap();
    assert!(text.starts_with("<|im_start|>system\nDefault."));
    let e = t.encode(&tok, msgs).unwrap();
    assert_eq!(
        masked_text(&tok, &e),
        vec![r#"{"action":[{"click":{"index":1}}]}<|im_end|>"#.to_string()]
    );
    // A broken template is a clear error naming the file.
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        json!({"chat_template": "{% for %}"}).to_string(),
    )
    .unwrap();
    let err = format!(
        "{:#}",
        ChatTemplate::for_model_dir(dir.path()).err().unwrap()
    );
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

/// A small dataset: `n` successful trajectories of 3 steps over a few task templates
/// (learnable patterns), plus one failure that must be ignored.
fn make_dataset(root: &Path, n: usize) {
    let mut ds = Dataset::create(root, "model-test", "synthetic").unwrap();
    let words = ["Submit", "Search", "Login", "Next", "Cancel", "Home"];
    let mut tasks = Vec::new();
    let mut trajs = Vec::new();
    for i in 0..n {
        let target = words[i % words.len()];
        let tid = format!("t{i}");
        tasks.push(Task {
            task_id: tid.clone(),
            website: "example.test".into(),
            domain: "test".into(),
            category: "click".into(),
            instruction: format!("Click the {target} button"),
            source: "synthetic".into(),
        });
        let steps = (0..3u32)
            .map(|s| {
                let idx = (i + s as usize) % words.len() + 1;
                let dom: String = words
                    .iter()
                    .enumerate()
                    .map(|(k, w)| format!("[{}]<button>{w}</button>\n", k + 1))
                    .collect();
                Step {
                    index: s,
                    state: State {
                        url: format!("http://example.test/{s}"),
                        title: "Example".into(),
                        dom_text: dom,
                        memory: format!("step {s}"),
                        ..Default::default()
                    },
                    output: ModelOutput {
                        thinking: format!("I should click {target}"),
                        next_goal: format!("Click {target}"),
                        actions: vec![Action::new("click", json!({"index": idx}))],
                        ..Default::default()
                    },
                    result: vec![],
                    timing: None,
                    ..Default::default()
                }
            })
            .collect();
        trajs.push(Trajectory {
            id: format!("traj{i}"),
            task_id: tid,
            attempt: 1,
            round: 1,
            reflection: None,
            source: "test".into(),
            teacher: "test".into(),
            outcome: Outcome {
                success: i + 1 != n,
                ..Default::default()
            },
            steps,
        });
    }
    ds.append_tasks(&tasks).unwrap();
    ds.append_trajectories(&trajs).unwrap();
}

fn test_overrides() -> Vec<String> {
    [
        "tiny.vocab_size=400",
        "tiny.hidden_size=32",
        "tiny.num_hidden_layers=2",
        "tiny.num_attention_heads=4",
        "tiny.num_key_value_heads=2",
        "tiny.head_dim=8",
        "tiny.intermediate_size=64",
        "micro_batch=4",
        "grad_accum=2",
        "context=256",
        "lr=0.01",
        "warmup_ratio=0.1",
        "epochs=50",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Appends `train sft --preset tiny` on `ds` into `run` for `steps` steps, without
/// periodic checkpoints, with the small test model.
fn tiny_sft_args(cmd: &mut std::process::Command, ds: &Path, run: &Path, steps: usize) {
    cmd.args(["train", "sft", "--preset", "tiny", "--dataset"])
        .arg(ds)
        .arg("--run-dir")
        .arg(run)
        .args(["--steps", &steps.to_string(), "--set", "checkpoint_every=0"]);
    for s in test_overrides() {
        cmd.args(["--set", &s]);
    }
}

fn metrics(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_checkpoint_records_its_prompt_layout_and_eval_renders_it() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 6);
    let rmsweb = || std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"));
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    ok(rmsweb()
        .args([
            "curate",
            "flatten",
            "--prompt-format",
            "rmsweb-echo",
            "--dataset",
        ])
        .arg(&ds)
        .output()
        .unwrap());
    let run = d.path().join("run");
    let mut sft = rmsweb();
    tiny_sft_args(&mut sft, &ds, &run, 2);
    ok(sft.output().unwrap());
    let record =
        std::fs::read_to_string(run.join("checkpoints/step-2/prompt_format.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert!(
        v["prompt_format"]
            .as_str()
            .unwrap()
            .starts_with("rmsweb-echo/"),
        "{record}"
    );
    // eval, given the run and no --prompt-format, renders the recorded layout; asked
    // for another, it renders that one and says so.
    let eval = |extra: &[&str]| {
        let mut c = rmsweb();
        c.args([
            "eval",
            "--policy",
            "local",
            "--tasks",
            "miniwob:click-button",
        ])
        .args([
            "--episodes",
            "1",
            "--max-steps",
            "1",
            "--max-new-tokens",
            "8",
        ])
        .arg("--checkpoint")
        .arg(&run)
        .arg("--out")
        .arg(d.path().join("eval.json"))
        .args(extra);
        ok(c.output().unwrap())
    };
    let told = eval(&[]);
    assert!(
        told.contains("prompt layout rmsweb-echo (recorded by the checkpoint)"),
        "{told}"
    );
    let told = eval(&["--prompt-format", "rmsweb"]);
    assert!(
        told.contains("was trained on the rmsweb-echo layout; rendering rmsweb as asked"),
        "{told}"
    );
}

#[test]
fn tiny_sft_drives_the_loss_down_and_writes_a_run_folder() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 9);
    let mut sets = test_overrides();
    sets.push("checkpoint_every=10".into());
    sets.push("max_steps=30".into());
    let cfg = SftConfig::preset("tiny", &ds, None)
        .unwrap()
        .with_overrides(&sets)
        .unwrap();
    let run_dir = d.path().join("runs/r1");
    let run = rmsweb::train::run::RunDir::open(&run_dir).unwrap();
    let mut reports = Vec::new();
    let out = sft::train(
        &cfg,
        &run,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |r| reports.push(r.loss),
    )
    .unwrap();
    assert_eq!(out, sft::Outcome::Finished);
    let m = metrics(&run_dir);
    assert_eq!(m.len(), 30);
    for key in [
        "sft/loss",
        "sft/tokens",
        "actor/lr",
        "actor/grad_norm",
        "perf/tokens_per_s",
        "perf/step_s",
    ] {
        assert!(m[0]["data"][key].is_number(), "missing {key}");
    }
    let first = m[0]["data"]["sft/loss"].as_f64().unwrap();
    let last: f64 = m[25..]
        .iter()
        .map(|x| x["data"]["sft/loss"].as_f64().unwrap())
        .sum::<f64>()
        / 5.0;
    assert!(last < 0.5 * first, "loss {first} → {last}");
    let status = rmsweb::train::run::RunDir::read_status(&run_dir).unwrap();
    assert_eq!(status.state, rmsweb::train::run::RunState::Finished);
    assert_eq!(status.step, 30);
    assert_eq!(status.total_steps, Some(30), "the Runs tab's ETA reads it");
    // Starting a new run over an existing one is refused (resume it instead).
    let again = sft::train(
        &cfg,
        &run,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    );
    assert!(format!("{:#}", again.unwrap_err()).contains("train resume"));
    let status = rmsweb::train::run::RunDir::read_status(&run_dir).unwrap();
    assert_eq!(
        status.state,
        rmsweb::train::run::RunState::Finished,
        "the old run is untouched"
    );
    let toml_text = std::fs::read_to_string(run_dir.join("run.toml")).unwrap();
    assert_eq!(SftConfig::from_toml(&toml_text).unwrap(), cfg);
    for s in [10, 20, 30] {
        assert!(
            run_dir
                .join(format!("checkpoints/step-{s}/trainer_state.json"))
                .exists()
        );
    }
    // The last checkpoint is a model folder the local policy loads and runs.
    let mut policy =
        LocalModelPolicy::from_checkpoint(&run_dir.join("checkpoints/step-30"), &Device::Cpu)
            .unwrap();
    policy.sampling.max_new_tokens = 12;
    let msgs = &chat()[..2];
    let a = policy.generate(msgs).unwrap();
    assert_eq!(
        a,
        policy.generate(msgs).unwrap(),
        "greedy decoding is deterministic"
    );
    policy.sampling.temperature = 1.0;
    let s1 = policy.generate(msgs).unwrap();
    assert_eq!(
        s1,
        policy.generate(msgs).unwrap(),
        "seeded sampling is reproducible"
    );
}

fn wait_for(mut cond: impl FnMut() -> bool, secs: u64) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed().as_secs() < secs {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    false
}

#[test]
fn sigkilled_run_resumes_from_its_checkpoint_with_the_same_data_order() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 9);
    let bin = env!("CARGO_BIN_EXE_rmsweb");
    let args = |run: &Path| {
        let mut a: Vec<String> = vec![
            "train".into(),
            "sft".into(),
            "--preset".into(),
            "tiny".into(),
            "--dataset".into(),
            ds.display().to_string(),
            "--run-dir".into(),
            run.display().to_string(),
            "--steps".into(),
            "16".into(),
            "--set".into(),
            "checkpoint_every=4".into(),
        ];
        for s in test_overrides() {
            a.push("--set".into());
            a.push(s);
        }
        a
    };
    // Reference: uninterrupted.
    let reference = d.path().join("ref");
    let st = std::process::Command::new(bin)
        .args(args(&reference))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    // Killed after its first checkpoint, then resumed.
    let killed = d.path().join("killed");
    let mut child = std::process::Command::new(bin)
        .args(args(&killed))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ck = killed.join("checkpoints/step-4/trainer_state.json");
    assert!(wait_for(|| ck.exists(), 120), "no checkpoint appeared");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = metrics(&killed).len();
    assert!(before < 16, "the run finished before it was killed");
    let st = std::process::Command::new(bin)
        .args(["train", "resume", &killed.display().to_string()])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let a = metrics(&reference);
    let b = metrics(&killed);
    assert_eq!(a.len(), 16);
    assert_eq!(b.len(), 16, "one metrics line per step after resume");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x["step"], y["step"]);
        assert_eq!(
            x["data"]["data/order_hash"], y["data"]["data/order_hash"],
            "step {}",
            x["step"]
        );
        let (lx, ly) = (
            x["data"]["sft/loss"].as_f64().unwrap(),
            y["data"]["sft/loss"].as_f64().unwrap(),
        );
        assert!(
            (lx - ly).abs() < 1e-4 * lx.abs().max(1.0),
            "step {}: {lx} vs {ly}",
            x["step"]
        );
    }
    let log = std::fs::read_to_string(killed.join("stdout.log")).unwrap();
    assert!(log.contains("resumed from checkpoint step"), "{log}");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_gracefully_with_a_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 9);
    let run = d.path().join("run");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"));
    tiny_sft_args(&mut cmd, &ds, &run, 100_000);
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(|| metrics(&run).len() >= 2, 120));
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let status = rmsweb::train::run::RunDir::read_status(&run).unwrap();
    assert_eq!(status.state, rmsweb::train::run::RunState::Stopped);
    assert!(
        run.join(format!(
            "checkpoints/step-{}/trainer_state.json",
            status.step
        ))
        .exists()
    );
}

#[test]
fn unknown_set_key_and_missing_model_are_clear_errors() {
    let ds = Path::new("/nonexistent");
    let e = SftConfig::preset("tiny", ds, None)
        .unwrap()
        .with_overrides(&["lrr=1".to_string()])
        .unwrap_err();
    assert!(format!("{e:#}").contains("lrr"));
    let e = SftConfig::preset("qwen3-lora", ds, None).unwrap_err();
    assert!(format!("{e:#}").contains("--model"));
    let c = SftConfig::preset("qwen3-lora", ds, Some(Path::new("/m")))
        .unwrap()
        .with_overrides(&["lora.r=16".to_string(), "device=cuda:1".to_string()])
        .unwrap();
    let l = c.lora.clone().unwrap();
    assert_eq!((l.r, l.alpha, l.dropout), (16, 128.0, 0.05));
    assert_eq!(c.device, "cuda:1");
    assert_eq!(
        (c.lr, c.epochs, c.seed, c.context, c.effective_batch()),
        (1e-4, 3, 42, 12_000, 32)
    );
}

#[test]
fn local_policy_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<LocalModelPolicy>();
}

#[test]
fn qwen3_lora_sft_trains_only_adapters_and_exports_a_loadable_peft_checkpoint() {
    lora_sft_trains_only_adapters("qwen3-lora", rmsweb::model::arch::Arch::qwen3());
}

/// The `lora` preset on a Llama base with attention and MLP biases (SmolLM2's family):
/// r 16 / α 32 by default, only adapters train (biases stay frozen), and the checkpoint
/// loads as base + PEFT adapter.
#[test]
fn lora_preset_on_a_llama_base_trains_only_adapters_and_exports_a_peft_checkpoint() {
    let l = SftConfig::preset("lora", Path::new("ds"), Some(Path::new("base")))
        .unwrap()
        .lora
        .unwrap();
    assert_eq!((l.r, l.alpha, l.target_modules.len()), (16, 32.0, 7));
    let e = SftConfig::preset("lora", Path::new("ds"), None).unwrap_err();
    assert!(format!("{e:#}").contains("rmsweb model import"), "{e:#}");
    let arch = rmsweb::model::arch::Arch {
        attention_bias: true,
        mlp_bias: true,
        ..rmsweb::model::arch::Arch::llama()
    };
    lora_sft_trains_only_adapters("lora", arch);
}

/// Trains `preset` four steps (r 4) on a random base of family `arch` and checks what
/// the run wrote.
fn lora_sft_trains_only_adapters(preset: &str, arch: rmsweb::model::arch::Arch) {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 5);
    // A "pretrained" base: random weights, a BPE tokenizer, a chat template.
    let base = d.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    let tok = small_tokenizer();
    tokenizer::save(&tok, &base).unwrap();
    let cfg = DecoderConfig {
        arch,
        vocab_size: tok.get_vocab_size(true),
        max_position_embeddings: 1024,
        ..tiny_config(true)
    };
    saved_model(&base, &cfg, 4);
    std::fs::write(
        base.join("tokenizer_config.json"),
        json!({"chat_template": rmsweb::model::chat_template::CHATML}).to_string(),
    )
    .unwrap();
    let sets: Vec<String> = [
        "lora.r=4",
        "lora.alpha=8",
        "micro_batch=2",
        "grad_accum=2",
        "context=512",
        "max_steps=4",
        "checkpoint_every=2",
        "lr=0.01",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let scfg = SftConfig::preset(preset, &ds, Some(&base))
        .unwrap()
        .with_overrides(&sets)
        .unwrap();
    let run_dir = d.path().join("run");
    let run = rmsweb::train::run::RunDir::open(&run_dir).unwrap();
    let out = sft::train(
        &scfg,
        &run,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out, sft::Outcome::Finished);
    let ck = run_dir.join("checkpoints/step-4");
    let trained = weights::load_file(&ck.join("trainable.safetensors"), &Device::Cpu).unwrap();
    assert!(!trained.is_empty());
    assert!(
        trained.keys().all(|k| k.contains(".lora_")),
        "only adapters train"
    );
    // B moved away from zero: the adapters learned something.
    let b = &trained["model.layers.0.self_attn.q_proj.lora_B.weight"];
    assert!(max_diff(b, &b.zeros_like().unwrap()) > 0.0);
    let adapter = ck.join("adapter");
    let c: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(adapter.join("adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(c["r"], 4);
    assert_eq!(c["target_modules"].as_array().unwrap().len(), 7);
    // The policy loads base + adapter from the checkpoint and generates.
    let mut p = LocalModelPolicy::from_checkpoint(&ck, &Device::Cpu).unwrap();
    p.sampling.max_new_tokens = 5;
    p.generate(&chat()[..2]).unwrap();
}

/// The policy's answer to the first step of `task` on `state` (five steps allowed).
fn first_step(
    policy: &mut dyn rmsweb::policy::Policy,
    task: &Task,
    state: &State,
) -> rmsweb::policy::PolicyOutput {
    policy
        .act(&rmsweb::policy::PolicyInput {
            task,
            state,
            history: &[],
            reflection: None,
            max_steps: 5,
            screenshot: None,
        })
        .unwrap()
}

/// The local model plays through the project's prompt renderer and parse contract:
/// a random tiny model answers (unparseable text, fed back once) without crashing.
#[test]
fn local_model_acts_as_a_policy_through_the_prompt_renderer() {
    use rmsweb::policy::Policy;
    use rmsweb::policy::local::LocalPolicy;
    let dir = tempfile::tempdir().unwrap();
    let texts = ["click the login button", "input the username"];
    let tok = tokenizer::train_bpe(texts.iter().copied(), 300, 2).unwrap();
    tokenizer::save(&tok, dir.path()).unwrap();
    let mut cfg = tiny_config(true);
    cfg.vocab_size = tok.get_vocab_size(true);
    cfg.max_position_embeddings = 8192;
    saved_model(dir.path(), &cfg, 3);
    let mut model = LocalModelPolicy::load(dir.path(), None, &Device::Cpu).unwrap();
    model.sampling.max_new_tokens = 8;
    let mut policy = LocalPolicy::new(model, "tiny");
    let task = Task {
        task_id: "t".into(),
        website: String::new(),
        domain: String::new(),
        category: String::new(),
        instruction: "click the login button".into(),
        source: "test".into(),
    };
    let state = State {
        url: "http://127.0.0.1/login".into(),
        elements: vec![rmsweb::trajectory::Element {
            index: 0,
            tag: "button".into(),
            text: "Login".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let out = first_step(&mut policy, &task, &state);
    assert_eq!(policy.name(), "tiny");
    // A random model does not speak the action contract: the step records why.
    assert!(out.output.actions.is_empty());
    assert!(
        out.parse_error
            .unwrap()
            .contains("unparseable answer twice")
    );
}

/// Grounded decoding makes even a random tiny model answer in the action contract:
/// every element index it names is one the prompt shows, and every value it types
/// stands in the instruction.
#[test]
fn grounded_decoding_keeps_a_random_model_to_shown_elements_and_instruction_values() {
    use rmsweb::policy::local::LocalPolicy;
    let dir = tempfile::tempdir().unwrap();
    let texts = [
        "enter \"Jerald\" into the text field",
        "click the submit button",
    ];
    let tok = tokenizer::train_bpe(texts.iter().copied(), 300, 2).unwrap();
    tokenizer::save(&tok, dir.path()).unwrap();
    let mut cfg = tiny_config(true);
    cfg.vocab_size = tok.get_vocab_size(true);
    // A random model babbles every free-text field to its 400-character cap (1,700 to
    // 3,100 characters in all, a character often several byte-level tokens): the
    // answer outgrows 300 new tokens, and the decoder closes it the shortest way
    // before they run out.
    cfg.max_position_embeddings = 2048;
    let task = Task {
        task_id: "t".into(),
        website: String::new(),
        domain: String::new(),
        category: String::new(),
        instruction: "Enter \"Jerald\" into the text field and press Submit.".into(),
        source: "test".into(),
    };
    let element = |index: u32, tag: &str, text: &str| rmsweb::trajectory::Element {
        index,
        tag: tag.into(),
        text: text.into(),
        ..Default::default()
    };
    let state = State {
        url: "http://127.0.0.1/enter-text".into(),
        elements: vec![element(4, "input", ""), element(9, "button", "Submit")],
        ..Default::default()
    };
    let typed = rmsweb::policy::grounding::typed_values(&task.instruction);
    assert_eq!(typed, ["Jerald"]);
    for seed in [3, 4, 5] {
        saved_model(dir.path(), &cfg, seed);
        let mut model = LocalModelPolicy::load(dir.path(), None, &Device::Cpu).unwrap();
        model.sampling.max_new_tokens = 300;
        let mut policy = LocalPolicy::new(model, "tiny");
        policy.grounded = true;
        let out = first_step(&mut policy, &task, &state);
        assert!(
            out.parse_error.is_none(),
            "seed {seed}: {:?}",
            out.parse_error
        );
        assert!(!out.output.actions.is_empty(), "seed {seed}");
        for a in &out.output.actions {
            if let Some(i) = a.target_index() {
                assert!([4, 9].contains(&i), "seed {seed}: {a:?}");
            }
            if a.name == "input" {
                let text = a.params["text"].as_str().unwrap();
                assert_eq!(text, "Jerald", "seed {seed}: {a:?}");
            }
        }
    }
}

/// The CPU thread count follows the CPUs the process may use, not the cores
/// `/proc/cpuinfo` lists: pinned to one CPU, training runs one thread (and says so).
#[cfg(target_os = "linux")]
#[test]
fn training_uses_the_cpus_it_is_pinned_to() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    make_dataset(&ds, 9);
    let run = d.path().join("run");
    let mut cmd = std::process::Command::new("taskset");
    cmd.args(["-c", "0", env!("CARGO_BIN_EXE_rmsweb")])
        .env_remove("RAYON_NUM_THREADS");
    tiny_sft_args(&mut cmd, &ds, &run, 1);
    let out = cmd.output().expect("taskset (util-linux) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No terminal: the progress comes as plain lines on standard output.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("step 1/1  loss ")),
        "{stdout}"
    );
    let log = std::fs::read_to_string(run.join("stdout.log")).unwrap();
    assert!(log.contains(" on cpu (1 thread) in F32"), "{log}");
    // A line a step, with its loss and the time left.
    let step = log
        .lines()
        .find(|l| l.contains(" step 1/1 loss "))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        step.contains("tokens/s") && step.ends_with(" left"),
        "{step}"
    );
}
