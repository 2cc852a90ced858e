//! Wall time of one Salvage-DS step of the `tiny` RL preset on the CPU, and where it
//! goes (`timing_s/{gen,probe,ref,update_actor}` of the trainer's own metrics).
//!
//! Setup (not timed): a tiny SFT run on the bundled dataset (`fixtures/`, its mined
//! pairs are the RL prompts), then `--steps` RL steps from its last checkpoint.
//!
//! `cargo bench --bench rl_step -- --sft-steps 30 --steps 4 [--dataset D --init SFT_RUN]
//! [--set KEY=VALUE ...]` (with `--init`, no SFT is trained: any SFT run folder with a
//! checkpoint, e.g. one of a live MiniWoB collection, and its dataset; `--set` takes
//! any `rmsweb train rl --set` key, e.g. `decode_rows=32` or `grounded=true`; with a
//! `--features cuda` build, `device=cuda:0`: README "GPU build" has the H200 figures of
//! the same trainer, 1.8–2.9 s per step on live MiniWoB prompts).
//! Under `cargo test --all-targets` it runs a one-step smoke on a far smaller model.

use rmsweb::train::rl::config::{PromptSource, RlConfig};
use rmsweb::train::rl::groups::Mode;
use rmsweb::train::run::RunDir;
use rmsweb::train::sft::SftConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn num(args: &[String], name: &str, default: usize) -> usize {
    arg(args, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sets(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main; no other thread exists yet.
    unsafe { rmsweb::train::cpu_tuning::configure_thread_pools() };
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dataset = arg(&args, "--dataset").map_or_else(|| repo.join("fixtures"), PathBuf::from);
    let tmp = tempfile::tempdir()?;
    let stop = Arc::new(AtomicBool::new(false));
    // A model far smaller than the preset's, for the smoke under `cargo test`.
    let small = [
        "tiny.vocab_size=512",
        "tiny.bpe_min_frequency=2",
        "tiny.hidden_size=64",
        "tiny.num_hidden_layers=2",
        "tiny.num_attention_heads=2",
        "tiny.num_key_value_heads=1",
        "tiny.head_dim=32",
        "tiny.intermediate_size=128",
    ];
    let init = match arg(&args, "--init") {
        Some(p) => PathBuf::from(p),
        None => {
            let mut s = sets(&["checkpoint_every=0"]);
            s.push(format!(
                "max_steps={}",
                num(&args, "--sft-steps", if full { 30 } else { 2 })
            ));
            if !full {
                s.extend(sets(&small));
                s.push("context=512".into());
            }
            let cfg = SftConfig::preset("tiny", &dataset, None)?.with_overrides(&s)?;
            let dir = tmp.path().join("sft");
            let t = std::time::Instant::now();
            rmsweb::train::sft::train(
                &cfg,
                &RunDir::open(&dir)?,
                false,
                stop.clone(),
                &mut |_| {},
            )?;
            eprintln!(
                "setup: SFT {} steps in {:.1} s",
                cfg.max_steps,
                t.elapsed().as_secs_f64()
            );
            dir
        }
    };
    let steps = num(&args, "--steps", if full { 4 } else { 1 });
    let mut s = sets(&["checkpoint_every=0"]);
    s.push(format!("steps={steps}"));
    if !full {
        s.extend(sets(&[
            "n=2",
            "gen_batch=2",
            "train_batch=2",
            "mini_batch=2",
            "max_gen_batches=1",
            "max_new_tokens=16",
            "probe_groups=1",
            "salvage_unit=2",
            "salvage_cap=2",
        ]));
    }
    s.extend(
        args.windows(2)
            .filter(|w| w[0] == "--set")
            .map(|w| w[1].clone()),
    );
    let cfg = RlConfig::preset(
        "tiny",
        Mode::SalvageDs,
        PromptSource::Mined,
        &init,
        &dataset,
    )?
    .with_overrides(&s)?;
    let dir = tmp.path().join("rl");
    let run = RunDir::open(&dir)?;
    rmsweb::train::rl::trainer::train(&cfg, &run, false, stop, &mut |_| {})?;
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl"))?;
    let rows: Vec<serde_json::Value> = metrics
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(
        rows.len() == steps,
        "{} metric rows for {steps} steps",
        rows.len()
    );
    let col = |k: &str| -> Vec<f64> { rows.iter().filter_map(|r| r["data"][k].as_f64()).collect() };
    // The first step also warms the allocator and the caches: report it apart.
    let step = col("timing_s/step");
    println!(
        "rl_step (tiny preset{}, {} threads): first step {:.2} s; median of the rest {:.2} s",
        if full { "" } else { ", smoke model" },
        rayon::current_num_threads(),
        step.first().copied().unwrap_or(f64::NAN),
        median(step.iter().skip(1).copied().collect()),
    );
    for k in ["gen", "probe", "ref", "update_actor"] {
        println!(
            "  {k:>12}: median {:.2} s",
            median(col(&format!("timing_s/{k}")))
        );
    }
    // What a step's time depends on: how many groups it sampled, and how long.
    println!(
        "  per step: median {} generation batches of {} groups × {} rollouts, {:.1} response tokens each",
        median(col("train/num_gen_batches")),
        cfg.gen_batch,
        cfg.n,
        median(col("response_length/mean")),
    );
    Ok(())
}
