//! Reference checks against Hugging Face transformers, without torch: the folders under
//! tests/data/hf/ were written by tests/data/hf/make_fixtures.py (transformers 5, peft;
//! see its docstring), each with transformers' logits and greedy tokens for a fixed
//! token sequence. Every check prints its measured difference (`--nocapture`).

use super::model::masked_text;
use candle_core::{DType, Device, Tensor};
use rmsweb::model::chat_template::{CHATML, ChatTemplate, Message};
use rmsweb::model::rope::RopeScaling;
use rmsweb::model::sample::{SampleConfig, generate};
use rmsweb::model::{Decoder, LocalModelPolicy, tokenizer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Largest logit difference accepted (issue #18: < 1e-4).
pub(crate) const TOLERANCE: f32 = 1e-4;
/// Greedy prefix length in the references (make_fixtures.py's PROMPT).
const PROMPT: usize = 8;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hf")
        .join(name)
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(t: &Tensor) -> Vec<u32> {
    t.to_dtype(DType::I64)
        .unwrap()
        .to_vec1::<i64>()
        .unwrap()
        .into_iter()
        .map(|x| x as u32)
        .collect()
}

pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// The references of a folder: input ids, transformers' logits, greedy sequence.
pub(crate) fn references(folder: &Path) -> (Vec<u32>, Tensor, Vec<u32>) {
    let r =
        candle_core::safetensors::load(folder.join("reference.safetensors"), &Device::Cpu).unwrap();
    (ids(&r["input_ids"]), r["logits"].clone(), ids(&r["greedy"]))
}

pub(crate) fn logits(model: &Decoder, input: &[u32]) -> Tensor {
    let t = Tensor::new(input, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    model.forward(&t, 0, None).unwrap().squeeze(0).unwrap()
}

/// Compares a loaded model with its folder's references: logits within TOLERANCE,
/// the same greedy tokens (decoded with the KV cache); returns the logit difference.
pub(crate) fn check_against_transformers(
    name: &str,
    policy: &LocalModelPolicy,
    folder: &Path,
) -> f32 {
    let (input, theirs, greedy) = references(folder);
    let ours = logits(&policy.model, &input);
    assert_eq!(ours.dims(), theirs.dims(), "{name}: logits shape");
    let d = max_abs_diff(&ours, &theirs);
    let cfg = SampleConfig {
        temperature: 0.0,
        max_new_tokens: greedy.len() - PROMPT,
        ..Default::default()
    };
    let decoded = generate(&policy.model, &greedy[..PROMPT], &[], &cfg).unwrap();
    let same = decoded
        .iter()
        .zip(&greedy[PROMPT..])
        .filter(|(a, b)| a == b)
        .count();
    eprintln!(
        "{name}: max |logit diff| {d:.2e} over {} logits; greedy {same}/{} tokens equal",
        theirs.elem_count(),
        greedy.len() - PROMPT
    );
    assert!(d < TOLERANCE, "{name}: logits differ by {d}");
    assert_eq!(decoded, &greedy[PROMPT..], "{name}: greedy tokens");
    d
}

fn load(name: &str) -> (LocalModelPolicy, PathBuf) {
    let folder = fixture(name);
    let p = LocalModelPolicy::load(&folder, None, &Device::Cpu)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    (p, folder)
}

/// The same model computed with another rotary embedding: the references must tell it
/// apart (the check is sensitive to what it guards).
fn assert_rope_matters(
    policy: &LocalModelPolicy,
    folder: &Path,
    change: impl Fn(&mut rmsweb::model::DecoderConfig),
) {
    let (input, theirs, _) = references(folder);
    let mut cfg = policy.model.config.clone();
    change(&mut cfg);
    let w = rmsweb::model::weights::load_dir(folder, &Device::Cpu).unwrap();
    let other = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false).unwrap();
    let d = max_abs_diff(&logits(&other, &input), &theirs);
    eprintln!("  (the rotary embedding read wrongly would differ by {d:.2})");
    assert!(
        d > 100.0 * TOLERANCE,
        "a wrong rotary embedding differs by only {d}"
    );
}

#[test]
fn tiny_checkpoint_written_by_rmsweb_matches_transformers() {
    let (p, folder) = load("tiny-ckpt");
    check_against_transformers("tiny-ckpt", &p, &folder);
}

#[test]
fn transformers5_layout_with_tied_embeddings_matches() {
    let (p, folder) = load("t5-tied");
    assert!(p.model.config.tie_word_embeddings);
    // The base lives only in `rope_parameters`: the old reading took 1e6.
    assert_eq!(p.model.config.rope_theta, 50_000.0);
    check_against_transformers("t5-tied", &p, &folder);
    assert_rope_matters(&p, &folder, |c| c.rope_theta = 1e6);
}

#[test]
fn legacy_layout_with_untied_embeddings_matches() {
    let (p, folder) = load("legacy-untied");
    assert!(!p.model.config.tie_word_embeddings);
    check_against_transformers("legacy-untied", &p, &folder);
}

/// A folder with a scaled rotary embedding: read as `kind`, matching transformers, and
/// the scaling matters to the references.
fn check_scaled_rope(name: &str, kind: fn(&RopeScaling) -> bool) {
    let (p, folder) = load(name);
    let scaling = p.model.config.rope_scaling.as_ref();
    assert!(scaling.is_some_and(kind), "{name}: read as {scaling:?}");
    check_against_transformers(name, &p, &folder);
    assert_rope_matters(&p, &folder, |c| c.rope_scaling = None);
}

#[test]
fn linear_rope_scaling_matches() {
    check_scaled_rope("linear-rope", |s| *s == RopeScaling::Linear { factor: 4.0 });
}

#[test]
fn yarn_rope_scaling_matches() {
    check_scaled_rope("yarn-rope", |s| matches!(s, RopeScaling::Yarn(_)));
}

#[test]
fn llama3_rope_scaling_matches() {
    check_scaled_rope("llama3-rope", |s| matches!(s, RopeScaling::Llama3(_)));
}

#[test]
fn dynamic_rope_matches_within_its_positions_and_refuses_beyond() {
    let (p, folder) = load("dynamic-rope");
    assert_eq!(
        p.model.config.rope_scaling,
        Some(RopeScaling::Dynamic { factor: 2.0 })
    );
    check_against_transformers("dynamic-rope", &p, &folder);
    let n = p.model.config.max_position_embeddings + 1;
    let input = Tensor::zeros((1, n), DType::U32, &Device::Cpu).unwrap();
    let e = p.model.forward(&input, 0, None).unwrap_err().to_string();
    assert!(e.contains("dynamic NTK"), "{e}");
}

#[test]
fn sharded_checkpoint_matches() {
    let folder = fixture("sharded");
    let shards = std::fs::read_dir(&folder)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy();
            n.starts_with("model-") && n.ends_with(".safetensors")
        })
        .count();
    assert!(shards > 1, "the fixture has {shards} shard(s)");
    let (p, folder) = load("sharded");
    check_against_transformers("sharded", &p, &folder);
}

#[test]
fn adapter_made_by_peft_matches_peft() {
    let folder = fixture("peft-adapter");
    // base_model_name_or_path is the base folder relative to the repository root.
    let text = std::fs::read_to_string(folder.join("adapter_config.json")).unwrap();
    let base = rmsweb::model::peft::base_model_of(&text, &folder).unwrap();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join(base);
    let p = LocalModelPolicy::load(&base, Some(&folder), &Device::Cpu).unwrap();
    check_against_transformers("peft-adapter", &p, &folder);
    // Without the adapter the model is another one.
    let (plain, _) = load("t5-tied");
    let (input, theirs, _) = references(&folder);
    let d = max_abs_diff(&logits(&plain.model, &input), &theirs);
    eprintln!("  (the base without the adapter differs by {d:.2})");
    assert!(d > 100.0 * TOLERANCE);
}

#[test]
fn tokenizer_ids_equal_autotokenizers() {
    let exp = expected();
    let tok = tokenizer::load(fixture("tiny-ckpt").join("tokenizer.json")).unwrap();
    let texts = exp["texts"].as_array().unwrap();
    let mut equal = 0;
    for (text, want) in texts.iter().zip(exp["ids"].as_array().unwrap()) {
        let text = text.as_str().unwrap();
        let want: Vec<u32> = serde_json::from_value(want.clone()).unwrap();
        let got = tok.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(got, want, "ids of {text:?}");
        equal += 1;
    }
    eprintln!(
        "tokenizer: ids equal to AutoTokenizer's on {equal}/{} texts",
        texts.len()
    );
    assert!(equal >= 30);
    // AutoTokenizer's end-of-turn and padding tokens are rmsweb's.
    let (eos, pad) = tokenizer::eos_and_pad(&tok).unwrap();
    assert_eq!(
        (eos, pad),
        (
            exp["eos_token"].as_str().unwrap(),
            exp["pad_token"].as_str().unwrap()
        )
    );
}

#[test]
fn tiny_checkpoints_tokenizer_config_is_the_one_rmsweb_writes() {
    // The fixture tested above is what the current writer produces, key for key.
    let folder = fixture("tiny-ckpt");
    let tok = tokenizer::load(folder.join("tokenizer.json")).unwrap();
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(folder.join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    let max_len = committed["model_max_length"].as_u64().unwrap() as usize;
    let written = tokenizer::tokenizer_config(&tok, CHATML, max_len).unwrap();
    assert_eq!(written, committed);
    assert_eq!(written["tokenizer_class"], tokenizer::HF_TOKENIZER_CLASS);
}

fn messages(v: &Value) -> Vec<Message> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn chat_templates_render_as_transformers_renders_them() {
    let exp = expected();
    let mut n = 0;
    for (folder, chats) in exp["renderings"].as_object().unwrap() {
        let t = ChatTemplate::for_model_dir(&fixture(folder)).unwrap();
        for (name, rows) in chats.as_object().unwrap() {
            let chat = messages(&exp["chats"][name]);
            for row in rows.as_array().unwrap() {
                let k = row["n"].as_u64().unwrap() as usize;
                for (key, with_prompt) in [("plain", false), ("gen", true)] {
                    if let Some(want) = row.get(key) {
                        let got = t.render(&chat[..k], with_prompt).unwrap();
                        assert_eq!(got, want.as_str().unwrap(), "{folder} {name}[..{k}] {key}");
                        n += 1;
                    }
                }
            }
        }
    }
    eprintln!("chat templates: {n} renderings equal to apply_chat_template's");
    // transformers 5's chat_template.jinja is the one read, not a ChatML fallback.
    let t = ChatTemplate::for_model_dir(&fixture("t5-tied")).unwrap();
    assert!(
        t.origin().ends_with("chat_template.jinja"),
        "{}",
        t.origin()
    );
}

#[test]
fn assistant_masks_equal_transformers_generation_masks_and_ids_equal_its_chat_ids() {
    let exp = expected();
    let tok = tokenizer::load(fixture("tiny-ckpt").join("tokenizer.json")).unwrap();
    let marked = ChatTemplate::for_model_dir(&fixture("legacy-untied")).unwrap();
    let chatml = ChatTemplate::for_model_dir(&fixture("tiny-ckpt")).unwrap();
    for (name, chat) in exp["chats"].as_object().unwrap() {
        let chat = messages(chat);
        let want: Vec<bool> = exp["assistant_masks"][name]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64() == Some(1))
            .collect();
        let got = marked.encode_turns(&tok, &chat).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].mask, want,
            "{name}: mask of the {{% generation %}} template"
        );
        // The prefix method on plain ChatML finds the same tokens.
        let e = chatml.encode(&tok, &chat).unwrap();
        let want_ids: Vec<u32> = serde_json::from_value(exp["chat_ids"][name].clone()).unwrap();
        assert_eq!(e.ids, want_ids, "{name}: chat ids");
        assert_eq!(masked_text(&tok, &e), masked_text(&tok, &got[0]), "{name}");
    }
}

#[test]
fn qwen3_template_masks_multi_turn_chats_turn_by_turn() {
    let exp = expected();
    let tok = tokenizer::load(fixture("tiny-ckpt").join("tokenizer.json")).unwrap();
    let t = ChatTemplate::for_model_dir(&fixture("t5-tied")).unwrap();
    let rendering = |chat: &str, n: usize, key: &str| -> String {
        let rows = exp["renderings"]["t5-tied"][chat].as_array().unwrap();
        let row = rows.iter().find(|r| r["n"] == n).unwrap();
        row[key].as_str().unwrap().to_string()
    };
    for name in ["multi", "thinking"] {
        let chat = messages(&exp["chats"][name]);
        let turns: Vec<usize> = (0..chat.len())
            .filter(|&i| chat[i].role == "assistant")
            .collect();
        let seqs = t.encode_turns(&tok, &chat).unwrap();
        // Qwen3 drops past answers' think blocks: each turn is its own sequence, the
        // text transformers renders for the conversation up to that turn.
        assert_eq!(seqs.len(), turns.len(), "{name}");
        for (seq, &i) in seqs.iter().zip(&turns) {
            let text = rendering(name, i + 1, "plain");
            assert_eq!(tok.decode(&seq.ids, false).unwrap(), text);
            let prompt = rendering(name, i, "gen");
            let reply = text[prompt.len()..].trim_end();
            assert_eq!(
                masked_text(&tok, seq),
                vec![reply.to_string()],
                "{name} turn {i}"
            );
        }
    }
}

fn rmsweb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn score_command_reports_transformers_log_probs_of_assistant_tokens() {
    let exp = expected();
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("chat.json");
    std::fs::write(&file, json_of(&exp["chats"]["multi"])).unwrap();
    let ckpt = fixture("tiny-ckpt");
    let score = |extra: &[&str]| {
        let mut args = vec![
            "score",
            "--checkpoint",
            ckpt.to_str().unwrap(),
            "--messages",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        rmsweb(&args)
    };
    let v = json_output(score(&["--json"]));
    let want: Vec<f64> = serde_json::from_value(exp["chat_logprobs"]["multi"].clone()).unwrap();
    let mut worst = 0f64;
    let tokens = v["sequences"][0]["tokens"].as_array().unwrap();
    assert!(tokens.len() > 10);
    for t in tokens {
        let pos = t["position"].as_u64().unwrap() as usize;
        let d = (t["logprob"].as_f64().unwrap() - want[pos - 1]).abs();
        worst = worst.max(d);
    }
    eprintln!(
        "score: {} assistant tokens, max |logprob diff| {worst:.2e}",
        tokens.len()
    );
    assert!(worst < 1e-4, "{worst}");
    let sum: f64 = tokens.iter().map(|t| t["logprob"].as_f64().unwrap()).sum();
    assert!((v["sum_logprob"].as_f64().unwrap() - sum).abs() < 1e-9);
    // The table form names the template and sums up.
    let out = score(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tokenizer_config.json") && text.contains("assistant tokens: sum"),
        "{text}"
    );
    // A bad file is named with the field.
    std::fs::write(&file, r#"{"messages": [{"role": "user"}]}"#).unwrap();
    let out = score(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("chat.json: field `messages[0]`") && err.contains("content"),
        "{err}"
    );
}

/// The JSON a successful command printed.
fn json_output(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn json_of(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

#[test]
fn generate_command_decodes_transformers_greedy_reply() {
    let exp = expected();
    let g = &exp["generate"];
    let ckpt = fixture("tiny-ckpt");
    let max = g["max_tokens"].to_string();
    let out = rmsweb(&[
        "generate",
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--prompt",
        g["prompt"].as_str().unwrap(),
        "--max-tokens",
        &max,
        "--json",
    ]);
    let v = json_output(out);
    assert_eq!(v["ids"], g["ids"]);
    eprintln!(
        "generate: {} greedy tokens equal to transformers'",
        g["ids"].as_array().unwrap().len()
    );
    // Neither or both inputs is a usage error.
    let out = rmsweb(&["generate", "--checkpoint", ckpt.to_str().unwrap()]);
    assert!(!out.status.success());
}
