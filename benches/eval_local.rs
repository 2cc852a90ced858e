//! A local model's live MiniWoB evaluation: wall time and episodes per minute of
//! `rmsweb eval --policy local` playing one episode at a time and several side by
//! side (`--parallel`, one batching engine), on the same tasks and seeds, and the
//! time a 240-episode evaluation takes at that rate.
//!
//! `cargo bench --bench eval_local -- --model DIR [--episodes N] [--parallel 1,8]
//! [--tasks a,b,...] [--grounded]` (N instances per task, default 2, over the recipe's
//! 12 task types; `DIR` a model folder, e.g. SmolLM2 imported by `rmsweb model
//! import`, or a run checkpoint). Needs Chromium and the MiniWoB pages
//! (`.ci/install-env.sh`).
//!
//! Without `--model` (as under `cargo test --all-targets`) a random tiny model plays
//! one grounded episode (2 steps at most) of two tasks at parallel 1 and 2.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The recipe's 12 task types (recipe.toml).
const TASKS: &str = "click-button,click-button-sequence,click-checkboxes,click-dialog-2,\
click-link,click-option,click-tab,choose-list,enter-password,enter-text,focus-text-2,login-user";

/// A random tiny model folder (the smoke).
fn tiny(dir: &Path) -> anyhow::Result<()> {
    use rmsweb::model::{Decoder, DecoderConfig, tokenizer, weights};
    let tok = tokenizer::train_bpe(["click the button", "enter the text"].iter(), 300, 2)?;
    tokenizer::save(&tok, dir)?;
    let cfg = DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
        vocab_size: tok.get_vocab_size(true),
        hidden_size: 32,
        intermediate_size: 48,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        head_dim: Some(8),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: true,
        max_position_embeddings: 8192,
        eos_token_id: None,
    };
    weights::save_file(
        &Decoder::random_weights(&cfg, 7)?,
        &dir.join("model.safetensors"),
    )?;
    cfg.save(dir)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let tmp = tempfile::tempdir()?;
    let model = arg(&args, "--model").map(std::path::PathBuf::from);
    let smoke = model.is_none();
    let ckpt = match model {
        Some(m) => m,
        None => {
            tiny(tmp.path())?;
            tmp.path().to_path_buf()
        }
    };
    let tasks = arg(&args, "--tasks").unwrap_or(if smoke {
        "click-button,enter-text"
    } else {
        TASKS
    });
    let tasks: Vec<String> = tasks
        .split(',')
        .map(|t| format!("miniwob:{}", t.trim()))
        .collect();
    let episodes: usize = arg(&args, "--episodes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 1 } else { 2 });
    let levels: Vec<usize> = arg(&args, "--parallel")
        .unwrap_or(if smoke { "1,2" } else { "1,8" })
        .split(',')
        .map(|c| c.trim().parse::<usize>())
        .collect::<Result<_, _>>()?;
    let grounded = smoke || args.iter().any(|a| a == "--grounded");
    let max_new = if smoke { "24" } else { "256" };
    let max_steps = if smoke { "2" } else { "10" };
    println!(
        "eval --policy local ({}), {} tasks x {episodes} seeds, max-steps {max_steps}, max-new-tokens {max_new}{}",
        ckpt.display(),
        tasks.len(),
        if grounded { ", grounded" } else { "" }
    );
    println!(
        "{:>8} {:>9} {:>8} {:>10} {:>9} {:>14}",
        "parallel", "episodes", "pass@1", "wall s", "ep/min", "240 episodes"
    );
    let mut first: Option<Vec<(String, u64, bool)>> = None;
    for &p in &levels {
        let out = tmp.path().join(format!("p{p}.json"));
        let t0 = Instant::now();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmsweb"));
        cmd.args(["eval", "--policy", "local", "--max-steps", max_steps])
            .args(["--tasks", &tasks.join(",")])
            .args(["--episodes", &episodes.to_string(), "--seed", "10000"])
            .args(["--parallel", &p.to_string(), "--max-new-tokens", max_new])
            .arg("--checkpoint")
            .arg(&ckpt)
            .arg("--out")
            .arg(&out);
        if grounded {
            cmd.arg("--grounded");
        }
        let o = cmd.output()?;
        anyhow::ensure!(
            o.status.success(),
            "eval --parallel {p} failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let wall = t0.elapsed().as_secs_f64();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&out)?)?;
        let n = r["episodes_total"].as_u64().unwrap_or(0) as f64;
        let eps: Vec<(String, u64, bool)> = r["episodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["task"].as_str().unwrap_or("").to_string(),
                    e["seed"].as_u64().unwrap_or(0),
                    e["success"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        println!(
            "{p:>8} {n:>9} {:>8.3} {wall:>10.1} {:>9.2} {:>12.1}min",
            r["pass_at_1"].as_f64().unwrap_or(f64::NAN),
            n / wall * 60.0,
            240.0 * wall / n / 60.0,
        );
        match &first {
            None => first = Some(eps),
            Some(f) => {
                let same = f.iter().zip(&eps).filter(|(a, b)| a == b).count();
                println!(
                    "{:>8} episodes with the outcome they had at parallel {}: {same}/{}",
                    "",
                    levels[0],
                    f.len()
                );
            }
        }
    }
    Ok(())
}
